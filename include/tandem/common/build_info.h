// Which tandem this is: its version and the commit of the sources it was built from
// (generated at every build by cmake/build_info.cmake), so that a result can be traced to its
// code, and a program older than its source folder says so instead of quietly running the
// older code (a build that failed leaves the previous program in place).
#pragma once

#include <string>

namespace tandem {

struct BuildInfo {
  std::string version;     // the project's version (CMakeLists.txt)
  std::string commit;      // full hash of the sources' commit; "unknown" outside a git checkout
  bool modified = false;   // the checkout had uncommitted changes to tracked files
  std::string source_dir;  // where the sources were
};

// This program's build.
BuildInfo build_info();

// One line: "0.1.0, commit 0123456789ab" (", with uncommitted changes" when modified).
std::string describe_build(const BuildInfo& build = build_info());

// When the git checkout at `source_dir` is at another commit than `built_commit`: a sentence
// naming both and how to build again; otherwise (the same commit, no checkout, no git, an
// unknown commit) empty. Runs `git rev-parse HEAD` there.
std::string sources_moved_on(const std::string& source_dir, const std::string& built_commit);

}  // namespace tandem
