// Files and folders a run writes: checked before it starts, and written so that a failure is
// reported, never silent.
//
// A run of hours must not reach its end to find that the folder of its trace is missing,
// read-only or on a file system that takes no files (/proc, /sys): the checks create and remove
// a probe file where the outputs will go. An output is always a regular file: a path that
// exists and is something else (a device such as /dev/null, a pipe, a socket, a folder) is
// refused, since writing it through a temporary file and a rename would replace the device
// node with a file.
#pragma once

#include <functional>
#include <string>
#include <string_view>

namespace tandem {

// A file that can be created or replaced: the path is a regular file or does not exist yet,
// and a probe file can be created (and is removed) in its folder. A link is followed. Throws
// Error naming `option`, the path and the reason.
void check_output_file(const std::string& path, const std::string& option);

// A folder that exists, or that can be created, and where files can be created: a probe file
// is created (and removed) in it, or in its nearest existing ancestor when it does not exist
// yet (nothing else is created). Throws Error naming `option`, the path and the reason.
void check_output_folder(const std::string& path, const std::string& option);

// Writes `bytes` as the file `path` (a link is followed to the file it names), so that a
// reader sees the old file or the new one, never a part: into a temporary file in the same
// folder, flushed to disk and closed, then renamed over `path`. An existing file keeps its
// permissions. Refuses a path that exists and is not a regular file. Every step is checked:
// a failure throws Error "could not write PATH: <reason>" and leaves no temporary file, and
// the old file (if any) as it was.
void write_output_file(const std::string& path, std::string_view bytes);

// The same for a file that a library writes by name (nifticlib): `fill` writes the temporary
// file it is given (its name ends in `ending`, e.g. ".nii.gz", where the library chooses the
// format by it; the file exists, empty), which is then flushed, closed and renamed as above.
// An exception from `fill` leaves no temporary file and the old file as it was.
void write_output_file_by(const std::string& path, const std::string& ending,
                          const std::function<void(const std::string& temporary)>& fill);

// A file that grows while a run goes and is read meanwhile (TensorBoard's event files): not
// written whole and renamed, so it is new instead: created under its own name, which must not
// exist (nothing is replaced, and a link or a device at the name is refused), and appended to
// without a buffer of its own (a reader sees each append at once); close() flushes it to disk.
// Every error throws Error "could not write PATH: <reason>" and closes the file.
class AppendedFile {
 public:
  explicit AppendedFile(std::string path);
  ~AppendedFile();  // closes without a report: close() reports
  AppendedFile(const AppendedFile&) = delete;
  AppendedFile& operator=(const AppendedFile&) = delete;

  const std::string& path() const { return path_; }
  bool open() const { return fd_ >= 0; }
  void append(std::string_view bytes);
  void close();

 private:
  [[noreturn]] void fail(const std::string& why);
  std::string path_;
  int fd_ = -1;
};

// "character device", "pipe", ... for what `path` is when it exists and is not a regular
// file; "" for a regular file or a path that does not exist (links are followed).
std::string non_regular_kind(const std::string& path);

}  // namespace tandem
