// IDX files (MNIST's format), as --data reads them: any bytes either read as an array whose
// size matches its header or throw tandem::Error. Any other exception, or a sanitizer report,
// is a crash.
#include "fuzz_file.h"
#include "tandem/common/check.h"
#include "tandem/data/idx.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static tandem::fuzz::FuzzFile file;
  const std::string& path = file.write(data, size);
  try {
    const std::vector<int64_t> dims = tandem::data::read_idx_dims(path);
    (void)dims;
  } catch (const tandem::Error&) {
  }
  try {
    torch::Tensor t = tandem::data::read_idx(path);
    TANDEM_ASSERT(t.is_contiguous() && t.dim() >= 1, "read_idx returned a {}-d tensor", t.dim());
  } catch (const tandem::Error&) {
  }
  return 0;
}
