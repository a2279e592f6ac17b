#include "tandem/checkpoint/load.h"

#include <algorithm>
#include <filesystem>
#include <set>

#include "shard.h"
#include "tandem/checkpoint/files.h"
#include "tandem/common/check.h"

namespace tandem::checkpoint {
namespace {

namespace fs = std::filesystem;

// The step of a folder named "step-<N>", or -1.
int64_t step_of(const std::string& name) {
  if (name.rfind("step-", 0) != 0 || name.size() == 5) return -1;
  int64_t step = 0;
  for (size_t i = 5; i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9') return -1;
    step = step * 10 + (name[i] - '0');
  }
  return step;
}

bool is_complete(const fs::path& folder) {
  std::error_code ec;
  return fs::is_directory(folder, ec) && fs::is_regular_file(folder / kManifestFile, ec);
}

}  // namespace

namespace detail {

// Checked before anything is decoded: a damaged shard never reaches the unpickler.
std::vector<char> read_verified(const std::string& checkpoint, const ShardRecord& r) {
  const std::string path = (fs::path(checkpoint) / r.file).string();
  std::error_code ec;
  TANDEM_CHECK(fs::exists(path, ec),
               "shard '{}' of stage {} is missing from checkpoint '{}'; the checkpoint is "
               "incomplete: load an earlier one",
               r.file, r.stage, checkpoint);
  std::vector<char> bytes = read_file(path);
  TANDEM_CHECK(static_cast<int64_t>(bytes.size()) == r.bytes,
               "shard '{}' is {} ({} bytes, the manifest records {}); load an earlier checkpoint",
               path, static_cast<int64_t>(bytes.size()) < r.bytes ? "truncated" : "too long",
               bytes.size(), r.bytes);
  const uint32_t crc = crc32(bytes.data(), bytes.size());
  TANDEM_CHECK(crc == r.crc32,
               "shard '{}' is corrupted: its CRC-32 is {} but the manifest records {}; load an "
               "earlier checkpoint",
               path, crc32_hex(crc), crc32_hex(r.crc32));
  return bytes;
}

StageTensors read_shards(const std::string& checkpoint, const Manifest& manifest,
                         const std::function<bool(const ShardRecord&)>& wanted) {
  StageTensors all;
  for (const ShardRecord& r : manifest.shards) {
    if (wanted && !wanted(r)) continue;
    const std::string file = (fs::path(checkpoint) / r.file).string();
    all.merge(decode_shard(read_verified(checkpoint, r), file));
  }
  return all;
}

}  // namespace detail

namespace {

void check_shape(const torch::Tensor& dst, const torch::Tensor& src, const std::string& name,
                 const std::string& checkpoint) {
  TANDEM_CHECK(dst.sizes() == src.sizes(),
               "'{}' has shape [{}] in checkpoint '{}' but [{}] in the model", name,
               fmt::join(src.sizes(), ", "), checkpoint, fmt::join(dst.sizes(), ", "));
}

// Copies `src` into `dst` (a parameter or buffer on its device). A copy to a GPU from pageable
// host memory is complete when copy_ returns (non_blocking=false), so the stage's own stream
// cannot read the old values afterwards.
void assign(const torch::Tensor& dst, const torch::Tensor& src) {
  torch::NoGradGuard no_grad;
  dst.copy_(src, /*non_blocking=*/false);
}

}  // namespace

std::vector<std::string> list_checkpoints(const std::string& dir) {
  std::vector<std::pair<int64_t, std::string>> found;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const int64_t step = step_of(entry.path().filename().string());
    if (step >= 0 && is_complete(entry.path())) found.emplace_back(step, entry.path().string());
  }
  std::sort(found.begin(), found.end());
  std::vector<std::string> out;
  for (auto& f : found) out.push_back(std::move(f.second));
  return out;
}

std::string latest_checkpoint(const std::string& dir) {
  const fs::path pointer = fs::path(dir) / "latest";
  std::error_code ec;
  if (fs::is_regular_file(pointer, ec)) {
    const std::vector<char> bytes = read_file(pointer.string());
    std::string name(bytes.begin(), bytes.end());
    while (!name.empty() && std::isspace(static_cast<unsigned char>(name.back()))) name.pop_back();
    // Only a plain folder name: the pointer never leads out of `dir`.
    if (step_of(name) >= 0 && is_complete(fs::path(dir) / name))
      return (fs::path(dir) / name).string();
  }
  std::vector<std::string> all = list_checkpoints(dir);
  return all.empty() ? "" : all.back();
}

std::string resolve_checkpoint(const std::string& path) {
  if (is_complete(path)) return path;
  std::error_code ec;
  TANDEM_CHECK(fs::is_directory(path, ec), "there is no checkpoint at '{}': no such folder", path);
  // A checkpoint folder named directly but without its manifest: say so (read_manifest throws).
  fs::path normal = fs::path(path).lexically_normal();
  if (!normal.has_filename()) normal = normal.parent_path();  // "step-5/"
  if (step_of(normal.filename().string()) >= 0) read_manifest(path);
  const std::string latest = latest_checkpoint(path);
  TANDEM_CHECK(!latest.empty(),
               "'{}' holds no complete checkpoint (a folder step-<N> with a {}); give the save "
               "directory of an earlier run, or start without resuming",
               path, kManifestFile);
  return latest;
}

Manifest verify(const std::string& checkpoint) {
  Manifest m = read_manifest(checkpoint);
  for (const ShardRecord& r : m.shards) detail::read_verified(checkpoint, r);
  return m;
}

TrainState load(runtime::Pipeline& pipeline, const std::string& path) {
  const std::string checkpoint = resolve_checkpoint(path);
  const Manifest m = read_manifest(checkpoint);
  const std::string diff = first_difference(m.fingerprint, fingerprint(pipeline.model()));
  TANDEM_CHECK(diff.empty(),
               "checkpoint '{}' was saved from another model: {}. Build the same model "
               "(same Config::model, Config::width, Config::blocks) to resume, or start a new run.",
               checkpoint, diff);

  // The layers this process holds, and the shards that hold them.
  std::set<std::string> local_layers;
  for (int s : pipeline.local_stages()) {
    auto [b, e] = pipeline.partition().layers_of(s);
    for (int i = b; i < e; ++i) local_layers.insert(pipeline.model().layers[i].name);
  }
  std::set<std::string> covered;
  detail::StageTensors saved;
  std::map<std::string, std::string> kind_of;  // parameter -> saved optimizer kind
  for (const ShardRecord& r : m.shards) {
    const bool needed = std::any_of(r.layers.begin(), r.layers.end(), [&](const std::string& l) {
      return local_layers.count(l) > 0;
    });
    if (!needed) continue;
    const std::string file = (fs::path(checkpoint) / r.file).string();
    detail::StageTensors t = detail::decode_shard(detail::read_verified(checkpoint, r), file);
    for (const auto& [name, p] : t.params) kind_of[name] = r.optimizer;
    saved.merge(std::move(t));
    covered.insert(r.layers.begin(), r.layers.end());
  }
  for (const std::string& l : local_layers) {
    TANDEM_CHECK(covered.count(l),
                 "checkpoint '{}' has no shard for layer '{}'; it is damaged: load "
                 "an earlier one",
                 checkpoint, l);
  }

  // Check everything before changing anything.
  for (int s : pipeline.local_stages()) {
    for (const auto& [name, p] : pipeline.stage_named_parameters(s)) {
      TANDEM_CHECK(saved.params.count(name), "checkpoint '{}' lacks parameter '{}'", checkpoint,
                   name);
      check_shape(p, saved.params.at(name), name, checkpoint);
      const torch::optim::Optimizer* opt = pipeline.optimizer(s);
      const std::string& kind = kind_of[name];
      if (opt && kind != "none") {
        const std::string current = optimizer_kind(*opt);
        TANDEM_CHECK(current == kind,
                     "checkpoint '{}' holds {} optimizer state but stage {} uses {}; resume with "
                     "Config::optimizer = {}",
                     checkpoint, kind, s, current, kind);
      }
    }
    for (const auto& [name, b] : detail::stage_buffers(pipeline, s)) {
      TANDEM_CHECK(saved.buffers.count(name), "checkpoint '{}' lacks buffer '{}'", checkpoint,
                   name);
      check_shape(b, saved.buffers.at(name), name, checkpoint);
    }
  }

  for (int s : pipeline.local_stages()) {
    const NamedTensors params = pipeline.stage_named_parameters(s);
    for (const auto& [name, p] : params) assign(p, saved.params.at(name));
    for (const auto& [name, b] : detail::stage_buffers(pipeline, s)) {
      assign(b, saved.buffers.at(name));
    }
    if (torch::optim::Optimizer* opt = pipeline.optimizer(s))
      import_state(*opt, params, saved.optimizer);
  }
  pipeline.set_step(m.state.step);
  return m.state;
}

}  // namespace tandem::checkpoint
