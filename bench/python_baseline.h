// The Python baselines (bench/pipe_baseline.py --serve) as a child process, so that a benchmark
// can time them in turn with its own runs: the load that other work puts on a shared machine
// then falls on both alike, and their ratio means something.
//
// Protocol: one request line in, one reply line out (see pipe_baseline.py). The child's stderr
// is the benchmark's.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

namespace tandem::bench {

// Owns the child process and both ends of its pipes. Not thread-safe; not copyable. The
// destructor closes the child's input (it then exits) and waits for it.
class PythonBaseline {
 public:
  // Starts argv[0] with argv (e.g. {"/usr/bin/python3", "bench/pipe_baseline.py", "--serve",
  // ...}). Throws std::runtime_error when the pipes or the process cannot be made.
  explicit PythonBaseline(const std::vector<std::string>& argv) {
    int in[2], out[2];  // in: we write, the child reads; out: the child writes, we read
    if (pipe(in) != 0) throw std::runtime_error("pipe() failed");
    if (pipe(out) != 0) {
      close(in[0]);
      close(in[1]);
      throw std::runtime_error("pipe() failed");
    }
    pid_ = fork();
    if (pid_ < 0) throw std::runtime_error("fork() failed");
    if (pid_ == 0) {
      dup2(in[0], STDIN_FILENO);
      dup2(out[1], STDOUT_FILENO);
      close(in[0]);
      close(in[1]);
      close(out[0]);
      close(out[1]);
      std::vector<char*> args;
      for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
      args.push_back(nullptr);
      execvp(args[0], args.data());
      std::perror(("cannot start " + argv[0]).c_str());
      _exit(127);
    }
    close(in[0]);
    close(out[1]);
    signal(SIGPIPE, SIG_IGN);  // a child that died shows as a failed write, not our death
    to_ = fdopen(in[1], "w");
    from_ = fdopen(out[0], "r");
  }

  ~PythonBaseline() {
    if (to_) std::fclose(to_);
    if (from_) std::fclose(from_);
    if (pid_ > 0) {
      int status = 0;
      waitpid(pid_, &status, 0);
    }
  }

  PythonBaseline(const PythonBaseline&) = delete;
  PythonBaseline& operator=(const PythonBaseline&) = delete;

  // Sends one request line and returns the reply line (without its newline). Throws
  // std::runtime_error when the child has ended or replies with "error ...".
  std::string ask(const std::string& request) {
    if (std::fprintf(to_, "%s\n", request.c_str()) < 0 || std::fflush(to_) != 0)
      throw std::runtime_error("the Python baseline stopped reading (request: " + request + ")");
    std::string reply;
    char buf[512];
    while (std::fgets(buf, sizeof buf, from_)) {
      reply += buf;
      if (!reply.empty() && reply.back() == '\n') break;
    }
    if (reply.empty() || reply.back() != '\n')
      throw std::runtime_error("the Python baseline ended without answering '" + request + "'");
    reply.pop_back();
    if (reply.rfind("error", 0) == 0)
      throw std::runtime_error("the Python baseline failed on '" + request + "': " + reply);
    return reply;
  }

  // ask() for a request whose reply is one number.
  double ask_number(const std::string& request) { return std::stod(ask(request)); }

 private:
  pid_t pid_ = -1;
  FILE* to_ = nullptr;
  FILE* from_ = nullptr;
};

}  // namespace tandem::bench
