// A path whose file holds the bytes of one fuzz input, for readers that take a path: one
// memory file (memfd) per process, rewritten for every input, opened by the readers through
// /proc/self/fd like any file. Readers that choose by the file name's ending (nifticlib) get a
// name with that ending: a symbolic link to the memory file in a temporary folder, removed
// with the object.
#pragma once

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace tandem::fuzz {

class FuzzFile {
 public:
  // `ending`: what the path must end in, e.g. ".nii.gz"; empty: any path.
  explicit FuzzFile(const std::string& ending = "") : fd_(memfd_create("tandem-fuzz", 0)) {
    if (fd_ < 0) {
      std::perror("memfd_create");
      std::abort();
    }
    path_ = "/proc/self/fd/" + std::to_string(fd_);
    if (ending.empty()) return;
    char dir[] = "/tmp/tandem-fuzz-XXXXXX";
    if (mkdtemp(dir) == nullptr) {
      std::perror("mkdtemp");
      std::abort();
    }
    dir_ = dir;
    const std::string link = dir_ + "/input" + ending;
    if (symlink(path_.c_str(), link.c_str()) != 0) {
      std::perror("symlink");
      std::abort();
    }
    path_ = link;
  }
  ~FuzzFile() {
    if (!dir_.empty()) {
      unlink(path_.c_str());
      rmdir(dir_.c_str());
    }
    close(fd_);
  }
  FuzzFile(const FuzzFile&) = delete;
  FuzzFile& operator=(const FuzzFile&) = delete;

  // Replaces the file's bytes with `data` and returns its path.
  const std::string& write(const uint8_t* data, size_t size) {
    if (ftruncate(fd_, 0) != 0 || (size > 0 && pwrite(fd_, data, size, 0) != ssize_t(size))) {
      std::perror("writing the fuzz input");
      std::abort();
    }
    return path_;
  }

 private:
  int fd_;
  std::string dir_;  // the temporary folder of the link; empty without one
  std::string path_;
};

}  // namespace tandem::fuzz
