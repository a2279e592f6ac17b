#include "tandem/checkpoint/state_dict.h"

#include <torch/serialize.h>

#include <filesystem>
#include <set>

#include "common/output_path.h"
#include "loaded_tensor.h"
#include "shard.h"
#include "tandem/checkpoint/files.h"
#include "tandem/checkpoint/load.h"
#include "tandem/common/check.h"
#include "zip_check.h"

namespace tandem::checkpoint {
namespace {

namespace fs = std::filesystem;

std::string shape_text(c10::IntArrayRef shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

// At most `n` names, then how many more.
std::string some(const std::vector<std::string>& names, size_t n = 8) {
  std::vector<std::string> shown(names.begin(), names.begin() + std::min(n, names.size()));
  std::string out = fmt::format("{}", fmt::join(shown, ", "));
  if (names.size() > n) out += fmt::format(" and {} more", names.size() - n);
  return out;
}

// Parameters and buffers of a checkpoint by name (shards checked first).
std::map<std::string, torch::Tensor> checkpoint_tensors(const std::string& path) {
  const std::string checkpoint = resolve_checkpoint(path);
  detail::StageTensors t = detail::read_shards(checkpoint, read_manifest(checkpoint));
  std::map<std::string, torch::Tensor> out = std::move(t.params);
  out.merge(t.buffers);
  return out;
}

}  // namespace

ConsolidatedDict consolidated_dict(const std::string& path) {
  const std::string checkpoint = resolve_checkpoint(path);
  const Manifest m = read_manifest(checkpoint);
  detail::StageTensors t = detail::read_shards(checkpoint, m);
  // Model order, as the unsplit model's state_dict() would list them.
  c10::Dict<std::string, at::Tensor> dict;
  for (const LayerRecord& layer : m.fingerprint.layers) {
    for (const TensorRecord& r : layer.tensors) {
      auto& from = r.buffer ? t.buffers : t.params;
      auto it = from.find(r.name);
      TANDEM_CHECK(it != from.end(),
                   "checkpoint '{}' lists '{}' in its manifest but no shard holds it", checkpoint,
                   r.name);
      dict.insert(r.name, it->second);
    }
  }
  return {torch::pickle_save(c10::IValue(dict)), static_cast<int64_t>(dict.size())};
}

int64_t consolidate(const std::string& path, const std::string& out_pt) {
  const ConsolidatedDict c = consolidated_dict(path);
  write_output_file(out_pt, std::string_view(c.bytes.data(), c.bytes.size()));
  return c.tensors;
}

void save_state_dict_file(const std::map<std::string, torch::Tensor>& tensors,
                          const std::string& path) {
  c10::Dict<std::string, at::Tensor> dict;
  for (const auto& [name, t] : tensors) {
    dict.insert(name,
                t.detach().to(torch::kCPU, /*non_blocking=*/false, /*copy=*/true).contiguous());
  }
  const std::vector<char> bytes = torch::pickle_save(c10::IValue(dict));
  write_output_file(path, std::string_view(bytes.data(), bytes.size()));
}

std::map<std::string, torch::Tensor> load_state_dict_file(const std::string& path) {
  const std::vector<char> bytes = read_file(path);
  detail::check_zip_archive(bytes, path, "a state dict");
  c10::IValue value;
  try {
    value = detail::pickle_load_sized(bytes);
  } catch (const std::exception& e) {
    // LibTorch's c10::Error, or a standard exception its unpickler throws on malformed bytes
    // (std::out_of_range from a memo index past its table).
    const auto* c10e = dynamic_cast<const c10::Error*>(&e);
    TANDEM_CHECK(false,
                 "'{}' cannot be read as a state dict: {}. Write it from Python with "
                 "torch.save({{k: v for k, v in model.state_dict().items()}}, path) (a plain dict "
                 "of tensors), or with `tandem consolidate`.",
                 path, c10e != nullptr ? c10e->what_without_backtrace() : e.what());
  }
  TANDEM_CHECK(value.isGenericDict(),
               "'{}' holds a {}, not a dict of tensors; save a plain dict {{name: tensor}} "
               "(torch.save(dict(model.state_dict()), path))",
               path, value.tagKind());
  std::map<std::string, torch::Tensor> out;
  for (const auto& item : value.toGenericDict()) {
    TANDEM_CHECK(item.key().isString(), "'{}' has a key that is not a string ({})", path,
                 item.key().tagKind());
    TANDEM_CHECK(item.value().isTensor(), "'{}' maps '{}' to a {}, not a tensor", path,
                 item.key().toStringRef(), item.value().tagKind());
    detail::check_loaded_tensor(item.value().toTensor(), path, item.key().toStringRef());
    out[item.key().toStringRef()] = item.value().toTensor();
  }
  return out;
}

std::map<std::string, torch::Tensor> read_tensors(const std::string& path) {
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  TANDEM_CHECK(fs::exists(status),
               "'{}' does not exist: give a state dict file (tandem consolidate, or torch.save of "
               "a dict) or a checkpoint folder",
               path);
  const bool folder = fs::is_directory(status);
  TANDEM_CHECK(folder || fs::is_regular_file(status),
               "'{}' is a {}, not a state dict file or a checkpoint folder: give one of those",
               path, non_regular_kind(path));
  return folder ? checkpoint_tensors(path) : load_state_dict_file(path);
}

void init_from(runtime::Pipeline& pipeline, const std::string& path) {
  const std::map<std::string, torch::Tensor> file = read_tensors(path);

  // Every check against the whole model (every process sees the same verdict), then copies
  // into the local stages only.
  std::vector<std::string> missing, mismatched, unexpected;
  std::set<std::string> known;
  std::string example;
  for (const auto& [name, t] : detail::model_tensors(pipeline.model(), /*buffers=*/true)) {
    known.insert(name);
    if (example.empty()) example = name;
    auto it = file.find(name);
    if (it == file.end()) {
      missing.push_back(name);
    } else if (it->second.sizes() != t.sizes()) {
      mismatched.push_back(fmt::format("{} (file {}, model {})", name,
                                       shape_text(it->second.sizes()), shape_text(t.sizes())));
    }
  }
  for (const auto& [name, t] : file) {
    if (!known.count(name)) unexpected.push_back(name);
  }
  if (!missing.empty() || !mismatched.empty() || !unexpected.empty()) {
    std::vector<std::string> parts;
    if (!missing.empty()) parts.push_back(fmt::format("missing {}", some(missing)));
    if (!unexpected.empty()) parts.push_back(fmt::format("unexpected {}", some(unexpected)));
    if (!mismatched.empty()) parts.push_back(fmt::format("other shape: {}", some(mismatched)));
    TANDEM_CHECK(false,
                 "'{}' does not match model '{}': {}. Names are \"<layer>.<parameter>\" with the "
                 "model's layer names (e.g. '{}'); see checkpoint/state_dict.h.",
                 path, pipeline.model().name, fmt::join(parts, "; "), example);
  }
  torch::NoGradGuard no_grad;
  for (int s : pipeline.local_stages()) {
    // A copy to a GPU from pageable host memory has finished when copy_ returns.
    for (const auto& [name, p] : pipeline.stage_named_parameters(s)) p.copy_(file.at(name));
    for (const auto& [name, b] : detail::stage_buffers(pipeline, s)) b.copy_(file.at(name));
  }
}

}  // namespace tandem::checkpoint
