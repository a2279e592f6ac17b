// Output files and folders are checked before a run: missing folders, folders given as files
// and files given as folders are refused with the option, the path and the reason.
#include "tandem/common/output_path.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

namespace tandem {
namespace {

namespace fs = std::filesystem;

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

class OutputPath : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ =
        fs::temp_directory_path() /
        ("tandem-output-path-" + std::to_string(::getpid()) + "-" +
         "-" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    std::ofstream(dir_ / "file.txt") << "x";
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string at(const std::string& name) const { return (dir_ / name).string(); }

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

}  // namespace
}  // namespace tandem
