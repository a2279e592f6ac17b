// Little helpers for the byte layouts of tandem's own MPI messages (tensor headers, wait
// answers): values appended in the machine's order, and read back without running past the end.
#pragma once

#include <cstring>
#include <string>
#include <vector>

#include "tandem/common/check.h"

namespace tandem::mpi {

template <typename T>
void put(std::vector<char>& out, T value) {
  const char* p = reinterpret_cast<const char*>(&value);
  out.insert(out.end(), p, p + sizeof(T));
}

// Reads values from `size` bytes at `data`; `what` names them in the error when they end early
// ("a tensor message header").
class ByteReader {
 public:
  ByteReader(const char* data, size_t size, const char* what)
      : data_(data), size_(size), what_(what) {}
  template <typename T>
  T get() {
    T value;
    need(sizeof(T));
    std::memcpy(&value, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return value;
  }
  std::string get_string(size_t n) {
    need(n);
    std::string s(data_ + pos_, n);
    pos_ += n;
    return s;
  }
  size_t left() const { return size_ - pos_; }
  bool done() const { return pos_ == size_; }

 private:
  void need(size_t n) {
    TANDEM_CHECK(n <= size_ - pos_, "{} of {} bytes ends early (at byte {})", what_, size_, pos_);
  }
  const char* data_;
  size_t size_;
  const char* what_;
  size_t pos_ = 0;
};

}  // namespace tandem::mpi
