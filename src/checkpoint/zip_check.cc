#include "zip_check.h"

#include <minizip/unzip.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "tandem/common/check.h"

namespace tandem::checkpoint::detail {
namespace {

// Deflate shrinks data at most 1032 to 1.
constexpr uint64_t kMaxDeflateRatio = 1032;

// minizip reads through these callbacks: from the bytes in memory, never past their end.
struct Memory {
  const char* data = nullptr;
  uint64_t size = 0;
  uint64_t pos = 0;
};

voidpf ZCALLBACK open_memory(voidpf opaque, const void*, int) {
  static_cast<Memory*>(opaque)->pos = 0;
  return opaque;
}
uLong ZCALLBACK read_memory(voidpf, voidpf stream, void* buf, uLong size) {
  auto* m = static_cast<Memory*>(stream);
  const uint64_t n = std::min<uint64_t>(size, m->size - m->pos);
  if (n > 0) std::memcpy(buf, m->data + m->pos, n);  // an empty vector's data() may be null
  m->pos += n;
  return static_cast<uLong>(n);
}
uLong ZCALLBACK write_memory(voidpf, voidpf, const void*, uLong) { return 0; }
ZPOS64_T ZCALLBACK tell_memory(voidpf, voidpf stream) { return static_cast<Memory*>(stream)->pos; }
long ZCALLBACK seek_memory(voidpf, voidpf stream, ZPOS64_T offset, int origin) {
  auto* m = static_cast<Memory*>(stream);
  uint64_t base = 0;
  if (origin == ZLIB_FILEFUNC_SEEK_CUR) base = m->pos;
  if (origin == ZLIB_FILEFUNC_SEEK_END) base = m->size;
  if (offset > m->size || base > m->size - offset) return -1;
  m->pos = base + offset;
  return 0;
}
int ZCALLBACK close_memory(voidpf, voidpf) { return 0; }
int ZCALLBACK error_memory(voidpf, voidpf) { return 0; }

}  // namespace

void check_zip_archive(const std::vector<char>& bytes, const std::string& path,
                       const std::string& what) {
  Memory memory{bytes.data(), bytes.size(), 0};
  zlib_filefunc64_def io{open_memory, read_memory,  write_memory, tell_memory,
                         seek_memory, close_memory, error_memory, &memory};
  unzFile zip = unzOpen2_64(path.c_str(), &io);
  TANDEM_CHECK(zip != nullptr,
               "'{}' cannot be read as {}: its {} bytes are not a zip archive with a readable "
               "directory (PyTorch's file format since 1.6, torch.save's default, is one)",
               path, what, bytes.size());
  struct Closer {
    unzFile zip;
    ~Closer() { unzClose(zip); }
  } closer{zip};
  unz_global_info64 global;
  TANDEM_CHECK(unzGetGlobalInfo64(zip, &global) == UNZ_OK, "'{}': cannot read its zip directory",
               path);
  uint64_t entries = 0;
  for (int rc = unzGoToFirstFile(zip); rc != UNZ_END_OF_LIST_OF_FILE; rc = unzGoToNextFile(zip)) {
    TANDEM_CHECK(rc == UNZ_OK,
                 "'{}' cannot be read as {}: entry {} of its zip directory is damaged (minizip "
                 "error {})",
                 path, what, entries, rc);
    unz_file_info64 info;
    char name[256] = {};
    TANDEM_CHECK(unzGetCurrentFileInfo64(zip, &info, name, sizeof name - 1, nullptr, 0, nullptr,
                                         0) == UNZ_OK,
                 "'{}' cannot be read as {}: entry {} of its zip directory is damaged", path, what,
                 entries);
    const bool stored = info.compression_method == 0, deflated = info.compression_method == 8;
    TANDEM_CHECK(stored || deflated,
                 "'{}' cannot be read as {}: zip entry '{}' uses compression method {}; PyTorch's "
                 "format stores its records (method 0) or deflates them (8)",
                 path, what, name, info.compression_method);
    const uint64_t room = deflated ? info.compressed_size * kMaxDeflateRatio : info.compressed_size;
    TANDEM_CHECK(info.compressed_size <= bytes.size() && info.uncompressed_size <= room,
                 "'{}' cannot be read as {}: zip entry '{}' declares {} bytes ({} stored) in an "
                 "archive of {} bytes",
                 path, what, name, info.uncompressed_size, info.compressed_size, bytes.size());
    // Opening the entry reads its local header and checks it against the directory.
    TANDEM_CHECK(unzOpenCurrentFile(zip) == UNZ_OK,
                 "'{}' cannot be read as {}: the local header of zip entry '{}' is missing or "
                 "disagrees with the directory",
                 path, what, name);
    const uint64_t start = unzGetCurrentFileZStreamPos64(zip);
    unzCloseCurrentFile(zip);
    TANDEM_CHECK(start <= bytes.size() && info.compressed_size <= bytes.size() - start,
                 "'{}' cannot be read as {}: zip entry '{}' runs from byte {} for {} bytes, past "
                 "the end of the archive ({} bytes); the file is cut short or damaged",
                 path, what, name, start, info.compressed_size, bytes.size());
    ++entries;
  }
  TANDEM_CHECK(entries == global.number_entry,
               "'{}' cannot be read as {}: its zip directory announces {} entries but holds {}",
               path, what, global.number_entry, entries);
}

}  // namespace tandem::checkpoint::detail
