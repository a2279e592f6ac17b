#include "tandem/trace/progress.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "tandem/common/check.h"

namespace tandem::trace {
namespace {

// A temporary file to print into and a settable clock.
struct Sink {
  std::FILE* file = std::tmpfile();
  double now = 100.0;
  Progress::Clock clock() {
    return [this] { return now; };
  }
  std::string text() {
    std::fflush(file);
    std::rewind(file);
    std::string out;
    for (int c; (c = std::fgetc(file)) != EOF;) out += char(c);
    return out;
  }
  ~Sink() { std::fclose(file); }
};

int count(const std::string& text, char c) {
  return static_cast<int>(std::count(text.begin(), text.end(), c));
}

TEST(Progress, AutoIsLineWhenNotATerminal) {
  Sink sink;
  EXPECT_EQ(Progress(Progress::Mode::kAuto, 10, sink.file, sink.clock()).mode(),
            Progress::Mode::kLine);
  EXPECT_EQ(Progress(Progress::Mode::kBar, 10, nullptr).mode(), Progress::Mode::kNone);
}

TEST(Progress, LineText) {
  Sink sink;
  Progress progress(Progress::Mode::kLine, 40, sink.file, sink.clock());
  sink.now += 2.0;
  progress.update(10, {{"loss", 0.5}, {"samples/s", 12345.6}});
  EXPECT_EQ(sink.text(),
            "step 10/40 (25%) elapsed 00:02 eta 00:06 5 steps/s loss=0.5 samples/s=12346\n");
}

TEST(Progress, BarText) {
  Sink sink;
  Progress progress(Progress::Mode::kBar, 40, sink.file, sink.clock());
  sink.now += 2.0;
  progress.update(10, {{"loss", 0.25}});
  progress.finish();
  EXPECT_EQ(
      sink.text(),
      "\r 25%|#######                       | 10/40 [00:02<00:06, 5 steps/s] loss=0.25\x1b[K\n");
}

TEST(Progress, UnknownTotalHasNoEta) {
  Sink sink;
  Progress progress(Progress::Mode::kLine, 0, sink.file, sink.clock());
  EXPECT_EQ(progress.render(7, 3725.0, {}), "step 7 elapsed 1:02:05 0.00188 steps/s");
  EXPECT_EQ(progress.render(0, 0.0, {}), "step 0 elapsed 00:00 ? steps/s");
}

TEST(Progress, CountsItsOwnUnit) {
  Sink sink;
  Progress line(Progress::Mode::kLine, 8, sink.file, sink.clock());
  line.set_unit("forward", "forwards");
  EXPECT_EQ(line.render(2, 4.0, {{"file", 1}}),
            "forward 2/8 (25%) elapsed 00:04 eta 00:12 0.5 forwards/s file=1");
  Progress bar(Progress::Mode::kBar, 0, sink.file, sink.clock());
  bar.set_unit("forward", "forwards");
  EXPECT_EQ(bar.render(3, 0.0, {}), "3 forwards [00:00, ? forwards/s]");
}

TEST(Progress, RateLimitedToTenPerSecond) {
  Sink sink;
  Progress progress(Progress::Mode::kLine, 1000, sink.file, sink.clock());
  for (int step = 1; step <= 100; ++step) {  // 100 updates over 1 s: 10 ms apart
    sink.now += 0.01;
    progress.update(step);
  }
  // Printed at steps 1, 11, 21, ..., 91: the first, then every 0.1 s.
  EXPECT_EQ(count(sink.text(), '\n'), 10);
  progress.finish();  // step 100 was held back: finish prints it
  const std::string text = sink.text();
  EXPECT_EQ(count(text, '\n'), 11);
  EXPECT_NE(text.find("step 100/1000"), std::string::npos);
}

TEST(Progress, LastStepAlwaysPrints) {
  Sink sink;
  Progress progress(Progress::Mode::kLine, 3, sink.file, sink.clock());
  progress.update(1);
  progress.update(2);  // same instant: held back
  progress.update(3);  // the last step: printed anyway
  EXPECT_EQ(count(sink.text(), '\n'), 2);
  progress.finish();
  EXPECT_EQ(count(sink.text(), '\n'), 2);  // nothing was pending
}

TEST(Progress, NoneAndFinishTwicePrintNothingMore) {
  Sink sink;
  {
    Progress none(Progress::Mode::kNone, 10, sink.file, sink.clock());
    none.update(5, {{"loss", 1}});
    none.finish();
  }
  EXPECT_EQ(sink.text(), "");
  Progress bar(Progress::Mode::kBar, 10, sink.file, sink.clock());
  bar.update(10);
  bar.finish();
  bar.finish();
  bar.update(10);
  EXPECT_EQ(count(sink.text(), '\n'), 1);
  EXPECT_EQ(count(sink.text(), '\r'), 1);
}

}  // namespace
}  // namespace tandem::trace
