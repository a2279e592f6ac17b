#include "tandem/checkpoint/save.h"

#include <algorithm>
#include <filesystem>
#include <vector>

#include "common/output_path.h"
#include "shard.h"
#include "tandem/checkpoint/files.h"
#include "tandem/checkpoint/load.h"
#include "tandem/checkpoint/manifest.h"
#include "tandem/common/check.h"

namespace tandem::checkpoint {
namespace {

namespace fs = std::filesystem;

constexpr const char* kLatestFile = "latest";

std::string shard_file(int stage) { return fmt::format("stage-{}.pt", stage); }
std::string record_file(int stage) { return fmt::format("stage-{}.json", stage); }

void barrier(const World& w) {
  if (w.barrier) w.barrier();
}

void at(const SaveOptions& o, SavePoint point, const std::string& folder) {
  if (o.hook) o.hook(point, folder);
}

// Writes one stage's shard and its record into `tmp`.
void write_shard(const runtime::Pipeline& pipeline, int stage, const fs::path& tmp) {
  const detail::StageTensors tensors = detail::collect_stage(pipeline, stage);
  const std::vector<char> bytes = detail::encode_shard(tensors);
  ShardRecord r;
  r.file = shard_file(stage);
  r.stage = stage;
  auto [b, e] = pipeline.partition().layers_of(stage);
  for (int i = b; i < e; ++i) r.layers.push_back(pipeline.model().layers[i].name);
  r.bytes = static_cast<int64_t>(bytes.size());
  r.crc32 = crc32(bytes.data(), bytes.size());
  r.optimizer = tensors.optimizer_kind;
  write_file_durable((tmp / r.file).string(), bytes.data(), bytes.size());
  write_file_durable((tmp / record_file(stage)).string(), shard_record_to_json_text(r));
}

Manifest make_manifest(const runtime::Pipeline& pipeline, const TrainState& state,
                       const World& world, const fs::path& tmp) {
  Manifest m;
  m.state = state;
  m.fingerprint = fingerprint(pipeline.model());
  m.balance = pipeline.partition().balance();
  m.stage_device = pipeline.stage_device();
  for (const auto& d : pipeline.devices()) m.devices.push_back(d.name);
  m.replicas = world.replicas;
  m.ranks = world.ranks;
  for (int s = 0; s < pipeline.partition().num_stages; ++s) {
    const fs::path path = tmp / record_file(s);
    TANDEM_CHECK(fs::exists(path),
                 "the shard of stage {} is missing from '{}' after the save barrier: every rank "
                 "must call checkpoint::save with the same step",
                 s, tmp.string());
    const std::vector<char> text = read_file(path.string());
    m.shards.push_back(parse_shard_record(std::string(text.begin(), text.end()), path.string()));
  }
  return m;
}

// Keeps the `keep` newest complete checkpoints (the one just saved among them) and removes the
// rest, with the temporary folders of saves that died.
void prune(const fs::path& dir, int keep, const std::string& newest) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (entry.is_directory() && name.rfind(".tmp-step-", 0) == 0) fs::remove_all(entry.path(), ec);
  }
  if (keep == 0) return;
  std::vector<std::string> all = list_checkpoints(dir.string());
  int kept = 0;
  for (auto it = all.rbegin(); it != all.rend(); ++it) {
    if (kept < keep || *it == newest) {
      ++kept;
      continue;
    }
    fs::remove_all(*it, ec);
    TANDEM_CHECK(!ec, "cannot remove the old checkpoint '{}': {}", *it, ec.message());
  }
  fsync_directory(dir.string());
}

}  // namespace

const char* to_string(SavePoint point) {
  switch (point) {
    case SavePoint::kShardsWritten:
      return "shards-written";
    case SavePoint::kManifestWritten:
      return "manifest-written";
    case SavePoint::kRenamed:
      return "renamed";
    case SavePoint::kLatestWritten:
      return "latest-written";
  }
  return "?";
}

std::string checkpoint_name(int64_t step) { return fmt::format("step-{}", step); }

void remove_checkpoints(const std::string& dir) {
  std::error_code ec;
  std::vector<fs::path> doomed;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    std::string step = name.rfind("step-", 0) == 0 ? name.substr(5) : "";
    if (name.rfind(".tmp-step-", 0) == 0) step = name.substr(10);
    const bool numbered =
        !step.empty() && step.find_first_not_of("0123456789") == std::string::npos;
    if (numbered || name == kLatestFile) doomed.push_back(entry.path());
  }
  // `latest` first: a crash in between leaves no pointer to a removed checkpoint.
  std::sort(doomed.begin(), doomed.end(), [](const fs::path& a, const fs::path& b) {
    return (a.filename() == kLatestFile) > (b.filename() == kLatestFile);
  });
  for (const fs::path& p : doomed) {
    fs::remove_all(p, ec);
    TANDEM_CHECK(!ec, "cannot remove the old checkpoint '{}': {}", p.string(), ec.message());
  }
  if (!doomed.empty()) fsync_directory(dir);
}

std::string save(const runtime::Pipeline& pipeline, const TrainState& state, const std::string& dir,
                 const SaveOptions& options) {
  const World& w = options.world;
  TANDEM_CHECK(!dir.empty(), "give a directory to save checkpoints in");
  TANDEM_CHECK(options.keep >= 0, "SaveOptions::keep must be 0 (keep all) or more, not {}",
               options.keep);
  TANDEM_CHECK(state.step == pipeline.step(),
               "the state to save says step {} but the pipeline has run {} steps; save "
               "TrainState.step = pipeline.step() (dropout streams continue from it)",
               state.step, pipeline.step());
  TANDEM_CHECK(w.rank >= 0 && w.rank < w.ranks && w.replica >= 0 && w.replica < w.replicas,
               "rank {} of {} and replica {} of {} do not describe a process of the world", w.rank,
               w.ranks, w.replica, w.replicas);
  const fs::path root(dir);
  const std::string name = checkpoint_name(state.step);
  const fs::path tmp = root / (".tmp-" + name);
  const fs::path final_path = root / name;
  std::error_code ec;

  // A temporary folder of this step left by a save that died is stale: start it afresh.
  if (w.rank == 0) {
    fs::create_directories(root, ec);
    TANDEM_CHECK(!ec, "cannot create the checkpoint directory '{}': {}", dir, ec.message());
    fs::remove_all(tmp, ec);
    fs::create_directory(tmp, ec);
    TANDEM_CHECK(!ec, "cannot create '{}': {}", tmp.string(), ec.message());
  }
  barrier(w);

  if (w.replica == 0) {
    TANDEM_CHECK(fs::is_directory(tmp, ec),
                 "rank {} cannot see the folder '{}' that rank 0 made for this checkpoint: the "
                 "save folder must be on a file system that every rank shares",
                 w.rank, tmp.string());
    for (int s : pipeline.local_stages()) {
      // The slabs of a spatial split hold the same values: the first slab's device writes.
      if (pipeline.lead_device(s) % pipeline.slabs() == 0) write_shard(pipeline, s, tmp);
    }
    fsync_directory(tmp.string());
  }
  at(options, SavePoint::kShardsWritten, tmp.string());
  barrier(w);

  if (w.rank == 0) {
    const Manifest m = make_manifest(pipeline, state, w, tmp);
    write_file_durable((tmp / kManifestFile).string(), to_json_text(m));
    fsync_directory(tmp.string());
    at(options, SavePoint::kManifestWritten, tmp.string());
    replace_directory(tmp.string(), final_path.string());  // the commit point
    at(options, SavePoint::kRenamed, final_path.string());
    write_output_file((root / kLatestFile).string(), name + "\n");
    at(options, SavePoint::kLatestWritten, final_path.string());
    prune(root, options.keep, final_path.string());
  }
  barrier(w);
  return final_path.string();
}

}  // namespace tandem::checkpoint
