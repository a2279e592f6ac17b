#include "common/output_path.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "tandem/common/check.h"

namespace tandem {
namespace {

namespace fs = std::filesystem;

// A name in `folder` that no other writer of this process or another one uses: the process id
// and a per-process counter (O_EXCL refuses it anyway if it exists).
fs::path scratch_name(const fs::path& folder, const std::string& stem) {
  static std::atomic<uint64_t> counter{0};
  return folder / fmt::format(".{}.{}-{}.tmp", stem, ::getpid(), counter++);
}

std::string kind_of(mode_t mode) {
  if (S_ISREG(mode)) return "";
  if (S_ISDIR(mode)) return "folder";
  if (S_ISCHR(mode)) return "character device";
  if (S_ISBLK(mode)) return "block device";
  if (S_ISFIFO(mode)) return "pipe";
  if (S_ISSOCK(mode)) return "socket";
  return "special file";
}

// "" when a file can be created (and was removed again) in `folder`, else why not. access()
// is not enough: it says yes to root, and to /proc and /sys, where nothing can be created.
std::string cannot_create_in(const fs::path& folder) {
  const fs::path probe = scratch_name(folder, "tandem-probe");
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return std::strerror(errno);
  ::close(fd);
  if (::unlink(probe.c_str()) != 0) return std::strerror(errno);
  return "";
}

// The file a path names: a link's target (the link stays), else the path itself.
fs::path resolved(const std::string& path) {
  std::error_code ec;
  if (fs::is_symlink(fs::symlink_status(path, ec))) {
    const fs::path target = fs::canonical(path, ec);
    if (!ec) return target;
  }
  return fs::path(path);
}

fs::path folder_of(const fs::path& file) {
  return file.has_parent_path() ? file.parent_path() : fs::path(".");
}

// Owns a temporary file until it is renamed into place: removed if that never happens.
class ScratchFile {
 public:
  ScratchFile(fs::path path, int fd) : path_(std::move(path)), fd_(fd) {}
  ~ScratchFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!path_.empty()) ::unlink(path_.c_str());
  }
  ScratchFile(const ScratchFile&) = delete;
  ScratchFile& operator=(const ScratchFile&) = delete;

  int fd() const { return fd_; }
  const fs::path& path() const { return path_; }
  // Closes the descriptor; false (errno set) when the close reports an error.
  bool close() {
    const int fd = fd_;
    fd_ = -1;
    return ::close(fd) == 0;
  }
  void renamed() { path_.clear(); }

 private:
  fs::path path_;
  int fd_;
};

}  // namespace

std::string non_regular_kind(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return "";
  return kind_of(st.st_mode);
}

void check_output_file(const std::string& path, const std::string& option) {
  TANDEM_CHECK(!path.empty(), "{} needs a file name", option);
  const fs::path file = resolved(path);
  struct stat st {};
  if (::stat(file.c_str(), &st) == 0) {
    TANDEM_CHECK(!S_ISDIR(st.st_mode), "{} {}: that is a folder; give a file name", option, path);
    TANDEM_CHECK(S_ISREG(st.st_mode),
                 "{} {}: that is a {}, not a regular file; tandem writes its outputs as files of "
                 "their own (a temporary file renamed over the old one): give a file name",
                 option, path, kind_of(st.st_mode));
    TANDEM_CHECK(::access(file.c_str(), W_OK) == 0, "{} {}: the file cannot be overwritten: {}",
                 option, path, std::strerror(errno));
  }
  const fs::path folder = folder_of(file);
  std::error_code ec;
  TANDEM_CHECK(fs::exists(folder, ec), "{} {}: the folder {} does not exist; create it first",
               option, path, folder.string());
  TANDEM_CHECK(fs::is_directory(folder, ec), "{} {}: {} is not a folder", option, path,
               folder.string());
  const std::string why = cannot_create_in(folder);
  TANDEM_CHECK(why.empty(), "{} {}: cannot create files in the folder {}: {}", option, path,
               folder.string(), why);
}

void check_output_folder(const std::string& path, const std::string& option) {
  TANDEM_CHECK(!path.empty(), "{} needs a folder name", option);
  std::error_code ec;
  fs::path existing = fs::absolute(fs::path(path), ec);
  TANDEM_CHECK(!ec, "{} {}: {}", option, path, ec.message());
  while (!fs::exists(existing, ec) && existing.has_parent_path() &&
         existing.parent_path() != existing)
    existing = existing.parent_path();
  TANDEM_CHECK(fs::is_directory(existing, ec), "{} {}: {} is not a folder", option, path,
               existing.string());
  const std::string why = cannot_create_in(existing);
  TANDEM_CHECK(why.empty(), "{} {}: cannot create files in {}: {}", option, path, existing.string(),
               why);
}

namespace {

// Writes all of `bytes` to `fd`; "" or why not.
std::string write_all(int fd, std::string_view bytes) {
  const char* p = bytes.data();
  size_t left = bytes.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return n < 0 ? std::strerror(errno) : "the file system took no bytes";
    p += n;
    left -= static_cast<size_t>(n);
  }
  return "";
}

// write_output_file and write_output_file_by: a temporary file beside `path`, made by `fill`
// (given its descriptor and name), flushed, closed and renamed over `path`.
void write_through_scratch(const std::string& path, const std::string& ending,
                           const std::function<void(int fd, const std::string& name)>& fill) {
  auto fail = [&path](const std::string& why) {
    throw Error(fmt::format("could not write {}: {}", path, why));
  };
  if (path.empty()) fail("no file name given");
  const fs::path file = resolved(path);
  struct stat old {};
  const bool exists = ::stat(file.c_str(), &old) == 0;
  if (exists && !S_ISREG(old.st_mode))
    fail(fmt::format("it is a {}, not a regular file", kind_of(old.st_mode)));
  fs::path tmp = scratch_name(folder_of(file), file.filename().string());
  tmp += ending;
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd < 0) fail(std::strerror(errno));
  ScratchFile scratch(tmp, fd);
  if (exists && ::fchmod(fd, old.st_mode & 07777) != 0) fail(std::strerror(errno));
  fill(fd, tmp.string());
  // A full disk may only say so when the data is flushed, or when the file is closed. A library
  // that wrote by name has closed its own descriptor; this one reaches the same file.
  if (::fsync(fd) != 0 && errno != EINVAL) fail(std::strerror(errno));
  if (!scratch.close()) fail(std::strerror(errno));
  if (std::rename(tmp.c_str(), file.c_str()) != 0) fail(std::strerror(errno));
  scratch.renamed();
  // The new name on disk too, where the file system can say so (errors here lose no data).
  const int dir = ::open(folder_of(file).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    ::fsync(dir);
    ::close(dir);
  }
}

}  // namespace

void write_output_file(const std::string& path, std::string_view bytes) {
  write_through_scratch(path, "", [&](int fd, const std::string&) {
    const std::string why = write_all(fd, bytes);
    if (!why.empty()) throw Error(fmt::format("could not write {}: {}", path, why));
  });
}

void write_output_file_by(const std::string& path, const std::string& ending,
                          const std::function<void(const std::string& temporary)>& fill) {
  write_through_scratch(path, ending, [&](int, const std::string& name) { fill(name); });
}

AppendedFile::AppendedFile(std::string path) : path_(std::move(path)) {
  if (path_.empty()) fail("no file name given");
  // O_EXCL with O_CREAT also refuses a link at the name, even one to nothing.
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0666);
  if (fd_ < 0) {
    const int error = errno;
    const std::string kind = non_regular_kind(path_);
    fail(error == EEXIST ? fmt::format("it exists already{}", kind.empty() ? "" : " as a " + kind)
                         : std::strerror(error));
  }
}

AppendedFile::~AppendedFile() {
  if (fd_ >= 0) ::close(fd_);
}

void AppendedFile::append(std::string_view bytes) {
  if (fd_ < 0) fail("it was closed before this write");
  const std::string why = write_all(fd_, bytes);
  if (!why.empty()) fail(why);
}

void AppendedFile::close() {
  if (fd_ < 0) return;
  const bool flushed = ::fsync(fd_) == 0 || errno == EINVAL;
  const int flush_errno = errno;
  const int fd = fd_;
  fd_ = -1;
  const bool closed = ::close(fd) == 0;
  if (!flushed || !closed) fail(std::strerror(flushed ? errno : flush_errno));
}

void AppendedFile::fail(const std::string& why) {
  if (fd_ >= 0) {
    ::close(fd_);
    fd_ = -1;
  }
  throw Error(fmt::format("could not write {}: {}", path_, why));
}

}  // namespace tandem
