// TFRecord framing, the container of TensorBoard event files. Each record is
//   uint64 length (little-endian) | uint32 masked_crc32c(length bytes)
//   | data[length]               | uint32 masked_crc32c(data)
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tandem::trace {

// One framed record holding `data`.
std::string frame_record(std::string_view data);

// The payloads of all records in `bytes`, in order. Throws tandem::Error naming `source` and
// the byte offset when a record is truncated or either CRC does not match.
std::vector<std::string> parse_records(std::string_view bytes,
                                       const std::string& source = "records");

// parse_records of the whole file at `path`; throws tandem::Error if it cannot be read.
std::vector<std::string> read_records(const std::string& path);

}  // namespace tandem::trace
