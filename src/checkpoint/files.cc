#include "tandem/checkpoint/files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <utility>

#include "common/output_path.h"
#include "tandem/common/check.h"

namespace tandem::checkpoint {
namespace {

namespace fs = std::filesystem;

// Owns one file descriptor; closes it on destruction, or by close(), which reports failure.
class Fd {
 public:
  Fd(const std::string& path, int flags, mode_t mode = 0644)
      : fd_(::open(path.c_str(), flags, mode)) {
    TANDEM_CHECK(fd_ >= 0, "cannot open '{}': {}.", path, std::strerror(errno));
  }
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  // False (errno set) when the close reports an error, e.g. a write-back that failed.
  bool close() { return ::close(std::exchange(fd_, -1)) == 0; }

 private:
  int fd_;
};

void fsync_or_throw(const Fd& fd, const std::string& path) {
  TANDEM_CHECK(::fsync(fd.get()) == 0, "could not write {}: {} (while flushing it to disk).", path,
               std::strerror(errno));
}

std::string parent_of(const std::string& path) {
  fs::path p = fs::path(path).parent_path();
  return p.empty() ? "." : p.string();
}

}  // namespace

std::vector<char> read_file(const std::string& path) {
  // O_NONBLOCK: opening a pipe must not wait for a writer; regular files ignore it.
  Fd fd(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  std::vector<char> bytes;
  struct stat st {};
  TANDEM_CHECK(::fstat(fd.get(), &st) == 0, "cannot read '{}': {}.", path, std::strerror(errno));
  // A device such as /dev/zero would be read until memory runs out.
  TANDEM_CHECK(S_ISREG(st.st_mode), "'{}' is not a regular file; a checkpoint is made of files.",
               path);
  if (st.st_size > 0) bytes.reserve(static_cast<size_t>(st.st_size));
  char chunk[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd.get(), chunk, sizeof(chunk));
    if (n < 0 && errno == EINTR) continue;
    TANDEM_CHECK(n >= 0, "error while reading '{}': {}.", path, std::strerror(errno));
    if (n == 0) break;
    bytes.insert(bytes.end(), chunk, chunk + n);
  }
  return bytes;
}

void write_file_durable(const std::string& path, const void* data, size_t size) {
  write_output_file(path, std::string_view(static_cast<const char*>(data), size));
}

void fsync_directory(const std::string& dir) {
  Fd fd(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  fsync_or_throw(fd, dir);
}

void replace_directory(const std::string& from, const std::string& to) {
  std::error_code ec;
  if (!fs::exists(to, ec)) {
    TANDEM_CHECK(std::rename(from.c_str(), to.c_str()) == 0, "cannot rename '{}' to '{}': {}.",
                 from, to, std::strerror(errno));
    fsync_directory(parent_of(to));
    return;
  }
  // `to` exists (the same step saved again). Swap the two names in one step where the kernel
  // can, so that `to` is never missing; `from` then holds the old folder, which is removed.
  bool swapped = false;
#ifdef RENAME_EXCHANGE
  swapped = ::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_EXCHANGE) == 0;
  TANDEM_CHECK(swapped || errno == EINVAL || errno == ENOSYS, "cannot swap '{}' and '{}': {}.",
               from, to, std::strerror(errno));
#endif
  if (!swapped) {
    // No atomic swap on this file system: move the old one aside first. A crash in between
    // leaves `to` missing; the loader then takes the newest other complete checkpoint.
    const std::string aside = from + ".old";
    fs::remove_all(aside, ec);
    TANDEM_CHECK(std::rename(to.c_str(), aside.c_str()) == 0, "cannot rename '{}' to '{}': {}.", to,
                 aside, std::strerror(errno));
    TANDEM_CHECK(std::rename(from.c_str(), to.c_str()) == 0, "cannot rename '{}' to '{}': {}.",
                 from, to, std::strerror(errno));
    fsync_directory(parent_of(to));
    fs::remove_all(aside, ec);
    return;
  }
  fsync_directory(parent_of(to));
  fs::remove_all(from, ec);
  TANDEM_CHECK(!ec, "cannot remove the replaced checkpoint '{}': {}.", from, ec.message());
}

uint32_t crc32(const void* data, size_t size) {
  uLong crc = ::crc32(0L, Z_NULL, 0);
  const Bytef* p = static_cast<const Bytef*>(data);
  while (size > 0) {
    const uInt n = static_cast<uInt>(std::min<size_t>(size, 1u << 30));
    crc = ::crc32(crc, p, n);
    p += n;
    size -= n;
  }
  return static_cast<uint32_t>(crc);
}

std::string crc32_hex(uint32_t crc) { return fmt::format("{:#010x}", crc); }

}  // namespace tandem::checkpoint
