// A checkpoint shard (stage-<S>.pt: a pickled dict of tensors in PyTorch's zip format), after
// its size and CRC-32 passed (a damaged file that happens to keep its checksum, or a crafted
// one): any bytes either decode into tensors whose every element lies in their storage, or
// throw tandem::Error.
#include "../src/checkpoint/shard.h"
#include "tandem/common/check.h"
#include "touch.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tandem::checkpoint::detail;
  const std::vector<char> bytes(data, data + size);
  try {
    const StageTensors t = decode_shard(bytes, "stage-0.pt");
    for (const auto& [name, p] : t.params) tandem::fuzz::touch(p);
    for (const auto& [name, b] : t.buffers) tandem::fuzz::touch(b);
    for (const auto& [name, fields] : t.optimizer) {
      for (const auto& [field, v] : fields) tandem::fuzz::touch(v);
    }
  } catch (const tandem::Error&) {
  }
  return 0;
}
