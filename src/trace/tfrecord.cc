#include "trace/tfrecord.h"

#include <cstdint>
#include <fstream>
#include <iterator>

#include "tandem/common/check.h"
#include "trace/crc32c.h"

namespace tandem::trace {
namespace {

void put_le(std::string& out, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out += static_cast<char>((value >> (8 * i)) & 0xFF);
}

uint64_t get_le(std::string_view bytes, std::size_t at, int n) {
  uint64_t value = 0;
  for (int i = 0; i < n; ++i)
    value |= uint64_t(static_cast<unsigned char>(bytes[at + i])) << (8 * i);
  return value;
}

}  // namespace

std::string frame_record(std::string_view data) {
  std::string out;
  out.reserve(data.size() + 16);
  put_le(out, data.size(), 8);
  put_le(out, mask_crc(crc32c(out.data(), 8, 0)), 4);
  out.append(data);
  put_le(out, mask_crc(crc32c(data)), 4);
  return out;
}

std::vector<std::string> parse_records(std::string_view bytes, const std::string& source) {
  std::vector<std::string> records;
  std::size_t at = 0;
  while (at < bytes.size()) {
    TANDEM_CHECK(bytes.size() - at >= 12,
                 "{}: record at byte {} is truncated in its header "
                 "({} bytes left, need 12); the file is cut short.",
                 source, at, bytes.size() - at);
    const uint64_t length = get_le(bytes, at, 8);
    TANDEM_CHECK(unmask_crc(uint32_t(get_le(bytes, at + 8, 4))) == crc32c(bytes.data() + at, 8, 0),
                 "{}: record at byte {} has a corrupt length (CRC mismatch).", source, at);
    TANDEM_CHECK(bytes.size() - at - 12 >= length && bytes.size() - at - 12 - length >= 4,
                 "{}: record at byte {} claims {} bytes but only {} follow; the file is cut short.",
                 source, at, length, bytes.size() - at - 12);
    std::string_view data = bytes.substr(at + 12, length);
    TANDEM_CHECK(unmask_crc(uint32_t(get_le(bytes, at + 12 + length, 4))) == crc32c(data),
                 "{}: record at byte {} has corrupt data (CRC mismatch).", source, at);
    records.emplace_back(data);
    at += 12 + length + 4;
  }
  return records;
}

std::vector<std::string> read_records(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  TANDEM_CHECK(in.is_open(), "cannot open record file \"{}\" for reading.", path);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  TANDEM_CHECK(!in.bad(), "reading record file \"{}\" failed.", path);
  return parse_records(bytes, path);
}

}  // namespace tandem::trace
