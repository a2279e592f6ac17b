// Two kinds of failure, kept apart:
//   TANDEM_CHECK(cond, fmt, args...)  a user error (bad option, bad file, bad model): throws
//                                     tandem::Error whose message carries the values involved
//                                     and, where there is one, a way out.
//   TANDEM_ASSERT(cond, fmt, args...) a broken invariant of tandem itself: prints and aborts.
#pragma once

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

namespace tandem {

// Every error tandem throws for a user to read. what() is one or more complete sentences.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace detail {
[[noreturn]] inline void assert_fail(const char* cond, const char* file, int line,
                                     const std::string& msg) {
  std::fprintf(stderr, "tandem: internal error at %s:%d: %s (%s)\n", file, line, msg.c_str(), cond);
  std::fflush(stderr);
  std::abort();
}
}  // namespace detail

}  // namespace tandem

#define TANDEM_CHECK(cond, ...)                               \
  do {                                                        \
    if (!(cond)) throw ::tandem::Error(fmt::format(__VA_ARGS__)); \
  } while (false)

#define TANDEM_ASSERT(cond, ...)                                                         \
  do {                                                                                   \
    if (!(cond))                                                                         \
      ::tandem::detail::assert_fail(#cond, __FILE__, __LINE__, fmt::format(__VA_ARGS__)); \
  } while (false)
