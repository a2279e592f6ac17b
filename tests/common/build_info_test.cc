// build_info: the commit a build names, and sources_moved_on, which tells a program built from
// one commit that its checkout has moved to another (on a git repository made for the test).
#include "tandem/common/build_info.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>

namespace tandem {
namespace {

namespace fs = std::filesystem;

// Runs a shell command in `dir` and returns its first line of output.
std::string first_line(const fs::path& dir, const std::string& command) {
  const fs::path out = dir / "out.txt";
  const std::string line =
      "cd '" + dir.string() + "' && " + command + " > '" + out.string() + "' 2>&1";
  EXPECT_EQ(std::system(line.c_str()), 0) << line;
  std::ifstream in(out);
  std::string text;
  std::getline(in, text);
  fs::remove(out);
  return text;
}

class Checkout : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tandem_build_info_" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    const std::string commit =
        "git -c user.name=t -c user.email=t@example.org commit -q --allow-empty -m";
    first_line(dir_, "git init -q . && " + commit + " one");
    first_ = first_line(dir_, "git rev-parse HEAD");
    first_line(dir_, commit + " two");
    second_ = first_line(dir_, "git rev-parse HEAD");
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
  std::string first_, second_;
};

TEST_F(Checkout, AnOlderCommitIsNamedWithTheCheckoutsAndTheWayOut) {
  ASSERT_EQ(first_.size(), 40u);
  ASSERT_NE(first_, second_);
  const std::string why = sources_moved_on(dir_.string(), first_);
  EXPECT_NE(why.find("built from commit " + first_.substr(0, 12) + " of " + dir_.string()),
            std::string::npos)
      << why;
  EXPECT_NE(why.find("now at commit " + second_.substr(0, 12)), std::string::npos) << why;
  EXPECT_NE(why.find("build again (make build"), std::string::npos) << why;
}

TEST_F(Checkout, TheSameCommitOrNoneKnownSaysNothing) {
  EXPECT_EQ(sources_moved_on(dir_.string(), second_), "");
  EXPECT_EQ(sources_moved_on(dir_.string(), "unknown"), "");
  EXPECT_EQ(sources_moved_on(dir_.string(), ""), "");
  // A folder that is no checkout (an installed or copied source tree), or is gone.
  fs::remove_all(dir_ / ".git");
  EXPECT_EQ(sources_moved_on(dir_.string(), first_), "");
  EXPECT_EQ(sources_moved_on((dir_ / "gone").string(), first_), "");
}

TEST(BuildInfo, NamesTheVersionCommitAndSources) {
  const BuildInfo b = build_info();
  EXPECT_TRUE(std::regex_match(b.version, std::regex("[0-9]+\\.[0-9]+\\.[0-9]+"))) << b.version;
  EXPECT_TRUE(b.commit == "unknown" || std::regex_match(b.commit, std::regex("[0-9a-f]{40}")))
      << b.commit;
  EXPECT_TRUE(fs::exists(fs::path(b.source_dir) / "CMakeLists.txt")) << b.source_dir;
  EXPECT_EQ(describe_build({"1.2.3", "0123456789abcdef0123456789abcdef01234567", true, "/x"}),
            "1.2.3, commit 0123456789ab, with uncommitted changes");
  EXPECT_EQ(describe_build({"1.2.3", "unknown", false, "/x"}),
            "1.2.3, commit unknown (not built from a git checkout)");
}

}  // namespace
}  // namespace tandem
