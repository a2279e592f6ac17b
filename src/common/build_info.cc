// build_info() itself is generated at build time (cmake/build_info.cmake).
#include "tandem/common/build_info.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace tandem {

namespace {
// The first line `git -C dir rev-parse HEAD` prints, or "" when git is missing or fails (its
// messages go to /dev/null: no checkout there is not this program's error).
std::string checkout_head(const std::string& dir) {
  int out[2];
  if (pipe(out) != 0) return "";
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&actions, out[0]);
  if (out[1] != STDOUT_FILENO) posix_spawn_file_actions_addclose(&actions, out[1]);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  const char* argv[] = {"git", "-C", dir.c_str(), "rev-parse", "HEAD", nullptr};
  pid_t pid = 0;
  const int failed =
      posix_spawnp(&pid, "git", &actions, nullptr, const_cast<char* const*>(argv), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(out[1]);
  std::string text;
  char buffer[128];
  for (ssize_t n; !failed && (n = read(out[0], buffer, sizeof(buffer))) != 0;) {
    if (n < 0) break;
    text.append(buffer, static_cast<size_t>(n));
  }
  close(out[0]);
  int status = 0;
  if (failed || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return "";
  return text.substr(0, text.find('\n'));
}
}  // namespace

std::string describe_build(const BuildInfo& b) {
  const std::string commit = b.commit == "unknown"
                                 ? "commit unknown (not built from a git checkout)"
                                 : "commit " + b.commit.substr(0, 12);
  return fmt::format("{}, {}{}", b.version, commit, b.modified ? ", with uncommitted changes" : "");
}

std::string sources_moved_on(const std::string& source_dir, const std::string& built_commit) {
  struct stat st {};
  if (built_commit.empty() || built_commit == "unknown" ||
      stat((source_dir + "/.git").c_str(), &st) != 0)
    return "";
  const std::string head = checkout_head(source_dir);
  if (head.empty() || head == built_commit) return "";
  return fmt::format(
      "this program was built from commit {} of {}, which is now at commit {}: it runs the "
      "older code, and its results are that code's; build again (make build, or cmake --build) "
      "to run the sources as they are",
      built_commit.substr(0, 12), source_dir, head.substr(0, 12));
}

}  // namespace tandem
