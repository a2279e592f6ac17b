#include "shard.h"

#include <torch/cuda.h>
#include <torch/serialize.h>

#include "loaded_tensor.h"
#include "tandem/common/check.h"
#include "zip_check.h"

namespace tandem::checkpoint::detail {
namespace {

torch::Tensor cpu_copy(const torch::Tensor& t) {
  return t.detach().to(torch::kCPU, /*non_blocking=*/false, /*copy=*/true).contiguous();
}

// A stage's kernels (its forward, backward and optimizer step) run on its device's own stream,
// which the blocking copies below, made from this thread's current stream, do not wait for:
// wait on the host for the whole device so that the bytes copied are the finished values.
// Checked at run time, so that the code also builds against a LibTorch without CUDA.
void finish_device_work(const runtime::Pipeline& pipeline, int stage) {
  const int lead = pipeline.lead_device(stage);
  if (lead < 0) return;  // not this process's stage
  const c10::Device device = pipeline.devices()[lead].device;
  if (device.is_cuda() && torch::cuda::is_available()) torch::cuda::synchronize(device.index());
}

}  // namespace

void StageTensors::merge(StageTensors&& other) {
  params.merge(other.params);
  buffers.merge(other.buffers);
  optimizer.merge(other.optimizer);
  if (optimizer_kind == "none") optimizer_kind = other.optimizer_kind;
}

NamedTensors stage_buffers(const runtime::Pipeline& pipeline, int stage) {
  NamedTensors out;
  auto [b, e] = pipeline.partition().layers_of(stage);
  for (int i = b; i < e; ++i) {
    for (auto& buf : graph::named_buffers(pipeline.model().layers[i]))
      out.push_back(std::move(buf));
  }
  return out;
}

NamedTensors model_tensors(const graph::Model& model, bool buffers) {
  NamedTensors out;
  for (const auto& layer : model.layers) {
    for (auto& p : graph::named_parameters(layer)) out.push_back(std::move(p));
    if (!buffers) continue;
    for (auto& buf : graph::named_buffers(layer)) out.push_back(std::move(buf));
  }
  return out;
}

StageTensors collect_stage(const runtime::Pipeline& pipeline, int stage) {
  finish_device_work(pipeline, stage);
  StageTensors t;
  const NamedTensors params = pipeline.stage_named_parameters(stage);
  for (const auto& [name, p] : params) t.params[name] = cpu_copy(p);
  for (const auto& [name, b] : stage_buffers(pipeline, stage)) t.buffers[name] = cpu_copy(b);
  if (const torch::optim::Optimizer* opt = pipeline.optimizer(stage)) {
    t.optimizer_kind = optimizer_kind(*opt);
    t.optimizer = export_state(*opt, params);
  }
  return t;
}

std::vector<char> encode_shard(const StageTensors& t) {
  c10::Dict<std::string, at::Tensor> dict;
  for (const auto& [name, p] : t.params) dict.insert("param/" + name, p);
  for (const auto& [name, b] : t.buffers) dict.insert("buffer/" + name, b);
  for (const auto& [name, fields] : t.optimizer) {
    for (const auto& [field, v] : fields) dict.insert("optim/" + name + "/" + field, v);
  }
  return torch::pickle_save(c10::IValue(dict));
}

StageTensors decode_shard(const std::vector<char>& bytes, const std::string& path) {
  check_zip_archive(bytes, path, "a shard");
  c10::IValue value;
  try {
    value = detail::pickle_load_sized(bytes);
  } catch (const std::exception& e) {
    // LibTorch's c10::Error, or a standard exception its unpickler throws on malformed bytes
    // (std::out_of_range from a memo index past its table).
    const auto* c10e = dynamic_cast<const c10::Error*>(&e);
    TANDEM_CHECK(false, "'{}' cannot be read as a shard: {}", path,
                 c10e != nullptr ? c10e->what_without_backtrace() : e.what());
  }
  TANDEM_CHECK(value.isGenericDict(), "'{}' is not a shard: it holds a {}, not a dict", path,
               value.tagKind());
  StageTensors t;
  for (const auto& item : value.toGenericDict()) {
    TANDEM_CHECK(item.key().isString() && item.value().isTensor(),
                 "'{}' is not a shard: it holds an entry that is not a named tensor", path);
    const std::string key = item.key().toStringRef();
    const torch::Tensor v = item.value().toTensor();
    check_loaded_tensor(v, path, key);
    const size_t slash = key.find('/');
    const std::string kind = key.substr(0, slash);
    if (kind == "param" || kind == "buffer") {
      (kind == "param" ? t.params : t.buffers)[key.substr(slash + 1)] = v;
    } else if (kind == "optim") {
      const size_t last = key.rfind('/');
      TANDEM_CHECK(last > slash, "'{}' holds a malformed key '{}'", path, key);
      t.optimizer[key.substr(slash + 1, last - slash - 1)][key.substr(last + 1)] = v;
    } else {
      TANDEM_CHECK(false, "'{}' holds an unknown key '{}'", path, key);
    }
  }
  return t;
}

}  // namespace tandem::checkpoint::detail
