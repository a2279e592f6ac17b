// Paths for a test program's files and folders under the system's temporary folder, removed with
// everything under them when the program ends: a test that fails or stops early leaves nothing
// behind either, and a suite run many times does not fill the folder.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <mutex>
#include <set>
#include <string>

namespace tandem::testing {

// The paths handed out, removed when the program ends (static destruction, after the tests).
class ScratchPaths {
 public:
  static ScratchPaths& get() {
    static ScratchPaths paths;
    return paths;
  }
  void add(const std::string& path) {
    std::lock_guard<std::mutex> lock(mu_);
    paths_.insert(path);
  }
  ~ScratchPaths() {
    for (const std::string& path : paths_) {
      std::error_code ignored;
      std::filesystem::remove_all(path, ignored);
    }
  }

 private:
  ScratchPaths() = default;
  std::mutex mu_;
  std::set<std::string> paths_;
};

// `prefix`, this process's id (suites of two checkouts may run at once on one machine) and, when
// given, "_" and `name`, under the temporary folder; removed when the program ends.
inline std::string scratch_path(const std::string& prefix, const std::string& name = "") {
  std::string path = ::testing::TempDir() + prefix + std::to_string(::getpid());
  if (!name.empty()) path += "_" + name;
  ScratchPaths::get().add(path);
  return path;
}

}  // namespace tandem::testing
