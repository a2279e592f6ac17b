#include "proto_wire.h"

#include <cstring>

#include "tandem/common/check.h"

namespace tandem::trace::wire {
namespace {

void put_fixed(std::string& out, uint64_t bits, int n) {
  for (int i = 0; i < n; ++i) out += static_cast<char>((bits >> (8 * i)) & 0xFF);
}

}  // namespace

void put_varint(std::string& out, uint64_t value) {
  while (value >= 0x80) {
    out += static_cast<char>((value & 0x7F) | 0x80);
    value >>= 7;
  }
  out += static_cast<char>(value);
}

void put_tag(std::string& out, int field, WireType type) {
  put_varint(out, (uint64_t(field) << 3) | uint64_t(type));
}

void put_double(std::string& out, int field, double value) {
  uint64_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  put_tag(out, field, kFixed64);
  put_fixed(out, bits, 8);
}

void put_float(std::string& out, int field, float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  put_tag(out, field, kFixed32);
  put_fixed(out, bits, 4);
}

void put_int64(std::string& out, int field, int64_t value) {
  put_tag(out, field, kVarint);
  put_varint(out, static_cast<uint64_t>(value));
}

void put_bytes(std::string& out, int field, std::string_view bytes) {
  put_tag(out, field, kLengthDelimited);
  put_varint(out, bytes.size());
  out.append(bytes);
}

bool Reader::next(int& field, WireType& type) {
  if (at_ >= data_.size()) return false;
  const uint64_t tag = varint();
  field = static_cast<int>(tag >> 3);
  type = static_cast<WireType>(tag & 7);
  TANDEM_CHECK(field > 0 && (type == kVarint || type == kFixed64 || type == kLengthDelimited ||
                             type == kFixed32),
               "malformed protobuf: tag {} at byte {} (field {}, wire type {}).", tag, at_, field,
               int(type));
  return true;
}

uint64_t Reader::varint() {
  uint64_t value = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    TANDEM_CHECK(at_ < data_.size(), "malformed protobuf: varint runs past the end ({} bytes).",
                 data_.size());
    const auto byte = static_cast<unsigned char>(data_[at_++]);
    value |= uint64_t(byte & 0x7F) << shift;
    if (!(byte & 0x80)) return value;
  }
  TANDEM_CHECK(false, "malformed protobuf: varint longer than 10 bytes at byte {}.", at_);
  return 0;
}

uint64_t Reader::fixed(int n) {
  TANDEM_CHECK(data_.size() - at_ >= std::size_t(n),
               "malformed protobuf: fixed{} field runs past the end.", 8 * n);
  uint64_t bits = 0;
  for (int i = 0; i < n; ++i)
    bits |= uint64_t(static_cast<unsigned char>(data_[at_ + i])) << (8 * i);
  at_ += n;
  return bits;
}

double Reader::fixed64_double() {
  const uint64_t bits = fixed(8);
  double value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

float Reader::fixed32_float() {
  const auto bits = static_cast<uint32_t>(fixed(4));
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

std::string_view Reader::bytes() {
  const uint64_t n = varint();
  TANDEM_CHECK(n <= data_.size() - at_, "malformed protobuf: {} bytes claimed, {} left.", n,
               data_.size() - at_);
  std::string_view out = data_.substr(at_, n);
  at_ += n;
  return out;
}

void Reader::skip(WireType type) {
  switch (type) {
    case kVarint:
      varint();
      break;
    case kFixed64:
      fixed(8);
      break;
    case kFixed32:
      fixed(4);
      break;
    case kLengthDelimited:
      bytes();
      break;
  }
}

}  // namespace tandem::trace::wire
