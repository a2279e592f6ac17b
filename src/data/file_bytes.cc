#include "data/file_bytes.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "common/output_path.h"
#include "tandem/common/check.h"

namespace tandem::data {
namespace {

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
using File = std::unique_ptr<std::FILE, FileCloser>;

File open_or_throw(const std::string& path, const char* mode) {
  File f(std::fopen(path.c_str(), mode));
  TANDEM_CHECK(f != nullptr, "cannot open '{}': {}.", path, std::strerror(errno));
  return f;
}

std::vector<uint8_t> read_plain(const std::string& path) {
  File f = open_or_throw(path, "rb");
  std::vector<uint8_t> bytes;
  uint8_t chunk[1 << 16];
  size_t n;
  while ((n = std::fread(chunk, 1, sizeof(chunk), f.get())) > 0)
    bytes.insert(bytes.end(), chunk, chunk + n);
  TANDEM_CHECK(!std::ferror(f.get()), "error while reading '{}': {}.", path, std::strerror(errno));
  return bytes;
}

// zlib's gzread also reads concatenated members; a stream cut short reports Z_BUF_ERROR.
std::vector<uint8_t> read_gzip(const std::string& path) {
  gzFile gz = gzopen(path.c_str(), "rb");
  TANDEM_CHECK(gz != nullptr, "cannot open '{}': {}.", path, std::strerror(errno));
  std::vector<uint8_t> bytes;
  std::vector<uint8_t> chunk(1 << 20);
  int errnum = Z_OK;
  std::string error;
  for (;;) {
    int n = gzread(gz, chunk.data(), static_cast<unsigned>(chunk.size()));
    if (n > 0) bytes.insert(bytes.end(), chunk.begin(), chunk.begin() + n);
    const char* msg = gzerror(gz, &errnum);
    if (errnum != Z_OK && errnum != Z_STREAM_END) {
      error = msg ? msg : "unknown zlib error";
      break;
    }
    if (n <= 0) break;
  }
  gzclose(gz);
  TANDEM_CHECK(errnum != Z_BUF_ERROR,
               "'{}' is a truncated gzip file ({} bytes decompressed before it ended): {}. "
               "Copy or download it again.",
               path, bytes.size(), error);
  TANDEM_CHECK(error.empty(), "'{}' is a corrupt gzip file: {}. Copy or download it again.", path,
               error);
  return bytes;
}

}  // namespace

bool is_gzip_file(const std::string& path) {
  File f(std::fopen(path.c_str(), "rb"));
  if (!f) return false;
  unsigned char magic[2] = {0, 0};
  return std::fread(magic, 1, 2, f.get()) == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
}

std::vector<uint8_t> read_file_bytes(const std::string& path) {
  // Opening once first gives the same "missing file" message for both kinds.
  open_or_throw(path, "rb");
  return is_gzip_file(path) ? read_gzip(path) : read_plain(path);
}

void write_file_bytes(const std::string& path, const std::vector<uint8_t>& bytes, bool gzip) {
  if (!gzip) {
    write_output_file(path,
                      std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
    return;
  }
  // zlib writes the temporary file of tandem's output writer by name.
  write_output_file_by(path, ".gz", [&](const std::string& temporary) {
    gzFile gz = gzopen(temporary.c_str(), "wb");
    TANDEM_CHECK(gz != nullptr, "could not write {}: {}", path, std::strerror(errno));
    size_t done = 0;
    while (done < bytes.size()) {
      unsigned n = static_cast<unsigned>(std::min<size_t>(bytes.size() - done, 1u << 30));
      if (gzwrite(gz, bytes.data() + done, n) != static_cast<int>(n)) break;
      done += n;
    }
    const int rc = gzclose(gz);
    TANDEM_CHECK(done == bytes.size() && rc == Z_OK, "could not write {}: zlib could not write it",
                 path);
  });
}

std::vector<uint8_t> read_file_prefix(const std::string& path, size_t max_bytes) {
  open_or_throw(path, "rb");
  // gzread passes a file that is not gzip through unchanged.
  gzFile gz = gzopen(path.c_str(), "rb");
  TANDEM_CHECK(gz != nullptr, "cannot open '{}': {}.", path, std::strerror(errno));
  std::vector<uint8_t> bytes(max_bytes);
  const int n = gzread(gz, bytes.data(), static_cast<unsigned>(max_bytes));
  int errnum = Z_OK;
  const char* msg = gzerror(gz, &errnum);
  const std::string error = n < 0 && msg ? msg : "";
  gzclose(gz);
  TANDEM_CHECK(n >= 0, "cannot read '{}': {}.", path, error);
  bytes.resize(static_cast<size_t>(n));
  return bytes;
}

}  // namespace tandem::data
