// A state dict file given to --init-from or `tandem eval --checkpoint` (PyTorch's zip format,
// written by torch.save or `tandem consolidate`): any bytes either load into named tensors
// whose every element lies in their storage, or throw tandem::Error.
#include "fuzz_file.h"
#include "tandem/checkpoint/state_dict.h"
#include "tandem/common/check.h"
#include "touch.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static tandem::fuzz::FuzzFile file;
  const std::string& path = file.write(data, size);
  try {
    for (const auto& [name, t] : tandem::checkpoint::load_state_dict_file(path))
      tandem::fuzz::touch(t);
  } catch (const tandem::Error&) {
  }
  return 0;
}
