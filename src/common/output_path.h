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

// "character device", "pipe", ... for what `path` is when it exists and is not a regular
// file; "" for a regular file or a path that does not exist (links are followed).
std::string non_regular_kind(const std::string& path);

}  // namespace tandem
