// Internal: the few pieces of the protobuf wire format that TensorBoard event files need.
// Encoding: a field is a tag varint (field_number << 3 | wire_type) and a payload:
//   varint (0): 7 bits per byte, low bits first, high bit set on all but the last byte;
//               negative int64 are their two's complement (10 bytes)
//   fixed64 (1), fixed32 (5): little-endian;  length-delimited (2): varint length, bytes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace tandem::trace::wire {

enum WireType : int { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

void put_varint(std::string& out, uint64_t value);
void put_tag(std::string& out, int field, WireType type);
void put_double(std::string& out, int field, double value);
void put_float(std::string& out, int field, float value);
void put_int64(std::string& out, int field, int64_t value);
void put_bytes(std::string& out, int field, std::string_view bytes);

// Walks the fields of one message. Throws tandem::Error on malformed input (a varint or a
// payload running past the end, an unknown wire type).
class Reader {
 public:
  explicit Reader(std::string_view data) : data_(data) {}

  // Reads the next tag; false at the end of the message.
  bool next(int& field, WireType& type);
  uint64_t varint();
  double fixed64_double();
  float fixed32_float();
  std::string_view bytes();
  void skip(WireType type);  // the payload of a field this reader does not want

 private:
  uint64_t fixed(int n);
  std::string_view data_;
  std::size_t at_ = 0;
};

}  // namespace tandem::trace::wire
