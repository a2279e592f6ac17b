// Files and folders a run will write, checked before it starts: a run of hours must not reach
// its end to find that the folder of its trace is missing or read-only.
#pragma once

#include <string>

namespace tandem {

// A file that can be created or overwritten: its folder exists and is writable, and the path
// is not a folder. Throws Error naming `option` and the reason.
void check_output_file(const std::string& path, const std::string& option);

// A folder that exists and is writable, or that can be created: its nearest existing ancestor
// is a writable folder. Throws Error naming `option` and the reason.
void check_output_folder(const std::string& path, const std::string& option);

}  // namespace tandem
