// Output files and folders are checked before a run: missing folders, folders given as files
// and files given as folders, paths that are not regular files and folders where nothing can
// be created are refused with the option, the path and the reason. Writes replace a regular
// file whole or report why they could not.
#include "common/output_path.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "error_of.h"
#include "tandem/common/check.h"

namespace tandem {
namespace {

namespace fs = std::filesystem;

class OutputPath : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("tandem-output-path-" + std::to_string(::getpid()) + "-" + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    std::ofstream(dir_ / "file.txt") << "x";
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string at(const std::string& name) const { return (dir_ / name).string(); }
  // The names in the test's folder, sorted: what a write left behind.
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir_)) out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }

  fs::path dir_;
};

TEST_F(OutputPath, AFileInAnExistingFolderOrAnExistingFileIsAccepted) {
  EXPECT_EQ(error_of([&] { check_output_file(at("new.json"), "--trace"); }), "");
  EXPECT_EQ(error_of([&] { check_output_file(at("file.txt"), "--trace"); }), "");
  EXPECT_FALSE(fs::exists(at("new.json"))) << "a check must not create the file";
}

TEST_F(OutputPath, AFileWhoseFolderIsMissingOrNotAFolderIsRefused) {
  EXPECT_EQ(error_of([&] { check_output_file(at("no/run.json"), "--trace"); }),
            "--trace " + at("no/run.json") + ": the folder " + at("no") +
                " does not exist; create it first");
  EXPECT_EQ(error_of([&] { check_output_file(at("file.txt/run.svg"), "--timeline"); }),
            "--timeline " + at("file.txt/run.svg") + ": " + at("file.txt") + " is not a folder");
  EXPECT_EQ(error_of([&] { check_output_file(dir_.string(), "--report"); }),
            "--report " + dir_.string() + ": that is a folder; give a file name");
  EXPECT_EQ(error_of([&] { check_output_file("", "--report"); }), "--report needs a file name");
}

TEST_F(OutputPath, AFolderThatExistsOrCanBeCreatedIsAccepted) {
  EXPECT_EQ(error_of([&] { check_output_folder(dir_.string(), "--save-dir"); }), "");
  EXPECT_EQ(error_of([&] { check_output_folder(at("a/b/c"), "--save-dir"); }), "");
  EXPECT_FALSE(fs::exists(at("a"))) << "a check must not create the folder";
}

TEST_F(OutputPath, AFolderUnderAFileIsRefused) {
  EXPECT_EQ(error_of([&] { check_output_folder(at("file.txt/ckpt"), "--save-dir"); }),
            "--save-dir " + at("file.txt/ckpt") + ": " + at("file.txt") + " is not a folder");
  EXPECT_EQ(error_of([&] { check_output_folder(at("file.txt"), "--tensorboard"); }),
            "--tensorboard " + at("file.txt") + ": " + at("file.txt") + " is not a folder");
}

std::string content(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

bool is_character_device(const char* path) {
  struct stat st {};
  return ::stat(path, &st) == 0 && S_ISCHR(st.st_mode);
}

// Writing a device through a temporary file and a rename would replace the device node with a
// file (/dev/null, /dev/full); writing into a pipe would block. Both are refused, before the
// run and at the write, and stay what they were.
TEST_F(OutputPath, APathThatIsNotARegularFileIsRefused) {
  ASSERT_EQ(::mkfifo(at("pipe").c_str(), 0600), 0);
  EXPECT_EQ(error_of([&] { check_output_file(at("pipe"), "--report"); }),
            "--report " + at("pipe") +
                ": that is a pipe, not a regular file; tandem writes its outputs as files of "
                "their own (a temporary file renamed over the old one): give a file name");
  EXPECT_EQ(error_of([&] { write_output_file(at("pipe"), "x"); }),
            "could not write " + at("pipe") + ": it is a pipe, not a regular file");
  EXPECT_TRUE(fs::is_fifo(at("pipe")));
  EXPECT_EQ(names(), (std::vector<std::string>{"file.txt", "pipe"}));
  if (!is_character_device("/dev/null") || !is_character_device("/dev/full"))
    GTEST_SKIP() << "/dev/null or /dev/full is not a character device here";
  EXPECT_NE(error_of([&] {
              check_output_file("/dev/null", "--trace");
            }).find("--trace /dev/null: that is a character device, not a regular file"),
            std::string::npos);
  EXPECT_EQ(error_of([&] { write_output_file("/dev/full", "x"); }),
            "could not write /dev/full: it is a character device, not a regular file");
  EXPECT_TRUE(is_character_device("/dev/full"));
}

// access() says yes to root, and to /proc, where no file can be created: the check creates one.
TEST_F(OutputPath, AFolderWhereNoFileCanBeCreatedIsRefused) {
  if (!fs::is_directory("/proc/self")) GTEST_SKIP() << "no /proc here";
  const std::string probe = "/proc/tandem-output-path-test";
  if (std::ofstream(probe)) {
    fs::remove(probe);
    GTEST_SKIP() << "a file can be created in /proc here";
  }
  EXPECT_NE(error_of([] {
              check_output_folder("/proc/x", "--save-dir");
            }).find("--save-dir /proc/x: cannot create files in /proc: "),
            std::string::npos);
  EXPECT_NE(error_of([] {
              check_output_folder("/proc/tb/a", "--tensorboard");
            }).find("--tensorboard /proc/tb/a: cannot create files in /proc: "),
            std::string::npos);
  EXPECT_NE(error_of([] {
              check_output_file("/proc/r.json", "--report");
            }).find("--report /proc/r.json: cannot create files in the folder /proc: "),
            std::string::npos);
}

TEST_F(OutputPath, AWriteReplacesTheFileWholeAndKeepsItsPermissions) {
  write_output_file(at("out.json"), "first");
  EXPECT_EQ(content(at("out.json")), "first");
  fs::permissions(at("out.json"),
                  fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read);
  write_output_file(at("out.json"), "second, longer");
  EXPECT_EQ(content(at("out.json")), "second, longer");
  EXPECT_EQ(fs::status(at("out.json")).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read);
  EXPECT_EQ(names(), (std::vector<std::string>{"file.txt", "out.json"}));
}

// A link stays a link: the file it names is replaced.
TEST_F(OutputPath, AWriteThroughALinkReplacesTheFileItNames) {
  fs::create_symlink(at("file.txt"), at("link"));
  write_output_file(at("link"), "through the link");
  EXPECT_TRUE(fs::is_symlink(at("link")));
  EXPECT_EQ(content(at("file.txt")), "through the link");
}

// A file system that runs out of room says so at a write, a flush or a close; a file-size
// limit (RLIMIT_FSIZE, with SIGXFSZ ignored) makes the same failure happen here. The message
// says why, the old file is as it was and nothing else is left behind.
TEST_F(OutputPath, AFailedWriteSaysWhyAndLeavesNoFile) {
  rlimit old{};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old), 0);
  rlimit small = old;
  small.rlim_cur = 1024;
  if (old.rlim_max != RLIM_INFINITY && old.rlim_max < small.rlim_cur)
    GTEST_SKIP() << "the file-size limit is already below 1 KiB";
  const auto previous = std::signal(SIGXFSZ, SIG_IGN);
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  const std::string big(4096, 'x');
  const std::string new_file = error_of([&] { write_output_file(at("new.json"), big); });
  const std::string old_file = error_of([&] { write_output_file(at("file.txt"), big); });
  ::setrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, previous);
  EXPECT_EQ(new_file, "could not write " + at("new.json") + ": " + std::strerror(EFBIG));
  EXPECT_EQ(old_file, "could not write " + at("file.txt") + ": " + std::strerror(EFBIG));
  EXPECT_EQ(content(at("file.txt")), "x");
  EXPECT_EQ(names(), (std::vector<std::string>{"file.txt"}));
}

// A library that writes by name (nifticlib, zlib) writes the temporary file, whose name keeps
// the ending it chooses the format by; the result replaces the file whole, and a failure of the
// library leaves the old file and nothing else.
TEST_F(OutputPath, ALibraryWritesTheTemporaryFileByName) {
  std::string seen;
  write_output_file_by(at("file.txt"), ".nii.gz", [&](const std::string& temporary) {
    seen = temporary;
    EXPECT_TRUE(fs::is_regular_file(temporary));
    std::ofstream(temporary) << "by name";
  });
  EXPECT_EQ(content(at("file.txt")), "by name");
  EXPECT_EQ(fs::path(seen).parent_path(), dir_);
  EXPECT_EQ(seen.substr(seen.size() - 7), ".nii.gz");
  EXPECT_EQ(error_of([&] {
              write_output_file_by(at("file.txt"), "", [](const std::string& temporary) {
                std::ofstream(temporary) << "half";
                throw Error("the library failed");
              });
            }),
            "the library failed");
  EXPECT_EQ(content(at("file.txt")), "by name");
  EXPECT_EQ(names(), (std::vector<std::string>{"file.txt"}));
  EXPECT_EQ(error_of([&] { write_output_file_by("/dev/null", "", [](const std::string&) {}); }),
            "could not write /dev/null: it is a character device, not a regular file");
}

// A file that grows while it is read is new: nothing at its name is replaced or followed.
TEST_F(OutputPath, AnAppendedFileIsNewAndReportsEveryFailure) {
  {
    AppendedFile f(at("events"));
    f.append("one ");
    EXPECT_EQ(content(at("events")), "one ");  // no buffer of its own: a reader sees it
    f.append("two");
    f.close();
    f.close();  // once closed, nothing more to do
    EXPECT_EQ(error_of([&] { f.append("three"); }),
              "could not write " + at("events") + ": it was closed before this write");
  }
  EXPECT_EQ(content(at("events")), "one two");
  EXPECT_EQ(error_of([&] { AppendedFile again(at("file.txt")); }),
            "could not write " + at("file.txt") + ": it exists already");
  fs::create_symlink(at("nowhere"), at("dangling"));
  EXPECT_EQ(error_of([&] { AppendedFile through(at("dangling")); }),
            "could not write " + at("dangling") + ": it exists already");
  EXPECT_FALSE(fs::exists(at("nowhere")));
  EXPECT_EQ(error_of([&] { AppendedFile device("/dev/null"); }),
            "could not write /dev/null: it exists already as a character device");
  EXPECT_EQ(error_of([&] { AppendedFile nowhere(at("no/events")); }),
            "could not write " + at("no/events") + ": " + std::strerror(ENOENT));
  EXPECT_EQ(content(at("file.txt")), "x");
}

}  // namespace
}  // namespace tandem
