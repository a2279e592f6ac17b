#include "loaded_tensor.h"

#include <caffe2/serialize/inline_container.h>
#include <caffe2/serialize/read_adapter_interface.h>
#include <torch/csrc/jit/serialization/import_read.h>
#include <torch/csrc/jit/serialization/storage_context.h>

#include <algorithm>
#include <cstring>
#include <memory>

#include "pickle_scan.h"
#include "tandem/common/check.h"

namespace tandem::checkpoint::detail {

void check_loaded_tensor(const torch::Tensor& t, const std::string& path, const std::string& name) {
  TANDEM_CHECK(t.defined() && t.layout() == c10::kStrided && t.has_storage(),
               "'{}' holds '{}', which is not a dense tensor; the file is damaged", path, name);
  // The element index of the last element the view reaches, without overflow; a view with a
  // zero size reaches nothing.
  int64_t last = t.storage_offset();
  bool valid = last >= 0, empty = false;
  for (int64_t d = 0; valid && d < t.dim(); ++d) {
    const int64_t size = t.sizes()[d], stride = t.strides()[d];
    int64_t reach = 0;
    valid = size >= 0 && stride >= 0 &&
            !__builtin_mul_overflow(size > 0 ? size - 1 : 0, stride, &reach) &&
            !__builtin_add_overflow(last, reach, &last);
    empty = empty || size == 0;
  }
  int64_t bytes = 0;
  valid =
      valid && !__builtin_mul_overflow(last + 1, static_cast<int64_t>(t.element_size()), &bytes);
  const auto storage = static_cast<int64_t>(t.storage().nbytes());
  // A storage that claims bytes but holds none (a damaged archive) would be read through null.
  TANDEM_CHECK(empty || t.storage().data() != nullptr,
               "'{}' holds '{}' of shape [{}], whose storage has no data; the file is damaged",
               path, name, fmt::join(t.sizes(), ", "));
  TANDEM_CHECK(valid && (empty || bytes <= storage),
               "'{}' holds '{}' of shape [{}] (strides [{}], offset {}), which reaches past the "
               "{} bytes of its storage; the file is damaged",
               path, name, fmt::join(t.sizes(), ", "), fmt::join(t.strides(), ", "),
               t.storage_offset(), storage);
}

namespace {
// The archive's bytes for LibTorch's zip reader. LibTorch's MemoryReadAdapter copies even 0
// bytes, into the null buffer of an empty record (UBSan, found by fuzz_shard).
class BytesReader final : public caffe2::serialize::ReadAdapterInterface {
 public:
  explicit BytesReader(const std::vector<char>& bytes) : bytes_(bytes) {}
  size_t size() const override { return bytes_.size(); }
  size_t read(uint64_t pos, void* buf, size_t n, const char* /*what*/) const override {
    if (pos >= bytes_.size()) return 0;
    n = std::min<size_t>(n, bytes_.size() - pos);
    if (n > 0) std::memcpy(buf, bytes_.data() + pos, n);
    return n;
  }

 private:
  const std::vector<char>& bytes_;
};
}  // namespace

c10::IValue pickle_load_sized(const std::vector<char>& bytes) {
  namespace serialize = caffe2::serialize;
  serialize::PyTorchStreamReader reader(std::make_shared<BytesReader>(bytes));
  TANDEM_CHECK(reader.hasRecord("data.pkl"), "it holds no data.pkl");
  {
    const auto [pickle, size] = reader.getRecord("data.pkl");
    check_pickle_lengths(static_cast<const char*>(pickle.get()), size);
  }
  // The unpickler takes a storage from the context when it has one under the pickle's key (the
  // record data/<key>), instead of sizing one from the pickle's element count.
  auto storages = std::make_shared<torch::jit::DeserializationStorageContext>();
  const std::string prefix = "data/";
  for (const std::string& name : reader.getAllRecords()) {
    if (name.compare(0, prefix.size(), prefix) != 0) continue;
    auto [data, size] = reader.getRecord(name);
    storages->addStorage(name.substr(prefix.size()),
                         c10::Storage(c10::Storage::use_byte_size_t(), static_cast<int64_t>(size),
                                      std::move(data), /*allocator=*/nullptr,
                                      /*resizable=*/false));
  }
  return torch::jit::readArchiveAndTensors("data", /*pickle_prefix=*/"", /*tensor_prefix=*/"",
                                           /*type_resolver=*/{}, /*obj_loader=*/{},
                                           /*device=*/{}, reader,
                                           torch::jit::Unpickler::defaultTypeParser, storages);
}

}  // namespace tandem::checkpoint::detail
