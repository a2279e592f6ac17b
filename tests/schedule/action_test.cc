#include "tandem/schedule/action.h"

#include <gtest/gtest.h>

#include "tandem/common/check.h"

namespace tandem::schedule {
namespace {

TEST(Action, PrintsComputeSendAndRecv) {
  EXPECT_EQ(to_string(compute_action(1, Op::kForward, 3)), "1F3");
  EXPECT_EQ(to_string(compute_action(0, Op::kBackward, 2)), "0B2");
  EXPECT_EQ(to_string(compute_action(2, Op::kInput, 0)), "2I0");
  EXPECT_EQ(to_string(compute_action(3, Op::kWeight, 1)), "3W1");
  EXPECT_EQ(to_string(send_action(compute_action(1, Op::kForward, 3), 2)), "1F3>2");
  EXPECT_EQ(to_string(recv_action(compute_action(2, Op::kForward, 3), 1)), "2F3<1");
  EXPECT_EQ(to_string(send_action(compute_action(2, Op::kInput, 3), 1)), "2I3>1");
  EXPECT_EQ(to_string(recv_action(compute_action(1, Op::kBackward, 3), 2)), "1B3<2");
}

TEST(Action, ParseInvertsPrint) {
  for (const char* text : {"0F0", "1F3", "0B2", "2I0", "3W1", "12F345", "1F3>2", "2F3<1", "2B3>1",
                           "1I3<2", "10B11>9"}) {
    const Action a = parse_action(text);
    EXPECT_EQ(to_string(a), text);
    EXPECT_EQ(parse_action(to_string(a)), a);
  }
  const Action send = parse_action("1F3>2");
  EXPECT_EQ(send, (Action{Kind::kSend, 1, Op::kForward, 3, 2}));
  EXPECT_EQ(parse_action("2B0"), (Action{Kind::kCompute, 2, Op::kBackward, 0, -1}));
}

TEST(Action, ParseRejectsWithTheText) {
  for (const char* text :
       {"", "F3", "1X3", "1F", "1F3>", "1F3=2", " 1F3", "1F3 ", "-1F3", "1F-3", "1F3>2>1", "1f3"}) {
    try {
      parse_action(text);
      ADD_FAILURE() << "accepted '" << text << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("'") + text + "'"), std::string::npos)
          << e.what();
    }
  }
}

TEST(Action, EqualityComparesEveryField) {
  const Action a = parse_action("1F3>2");
  EXPECT_NE(a, parse_action("1F3<2"));
  EXPECT_NE(a, parse_action("1F3>0"));
  EXPECT_NE(a, parse_action("1B3>2"));
  EXPECT_NE(a, parse_action("1F2>2"));
  EXPECT_NE(a, parse_action("0F3>2"));
  EXPECT_NE(parse_action("1F3"), a);
  EXPECT_EQ(ActionHash()(a), ActionHash()(parse_action("1F3>2")));
}

}  // namespace
}  // namespace tandem::schedule
