// Writes the seed corpus of every fuzz target: small valid inputs of each reader, made with
// tandem's own writers, so that fuzzing starts from files the readers accept.
//   fuzz_seeds fuzz/corpus      (run from the repository root; replaces the seed-*.* files)
// Crashing inputs found by fuzzing sit next to the seeds as crash-*; they are kept.
#include <filesystem>
#include <fstream>

#include "../src/checkpoint/shard.h"
#include "data/file_bytes.h"
#include "tandem/checkpoint/manifest.h"
#include "tandem/checkpoint/state_dict.h"
#include "tandem/data/idx.h"
#include "tandem/data/nifti.h"
#ifdef TANDEM_WITH_MPI
#include "mpi/wire.h"
#endif

namespace fs = std::filesystem;
using namespace tandem;

namespace {

fs::path root;

fs::path seed(const std::string& target, const std::string& name) {
  fs::create_directories(root / target);
  return root / target / ("seed-" + name);
}

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

void idx_seeds() {
  data::write_idx(seed("idx", "uint8-2x3x3.idx"),
                  torch::arange(18, torch::kUInt8).reshape({2, 3, 3}));
  data::write_idx(seed("idx", "uint8-2x3x3.idx.gz"),
                  torch::arange(18, torch::kUInt8).reshape({2, 3, 3}), /*gzip=*/true);
  data::write_idx(seed("idx", "int8-4.idx"), torch::tensor({-1, 0, 1, 2}, torch::kInt8));
  data::write_idx(seed("idx", "int16-3x1.idx"),
                  torch::tensor({-300, 0, 300}, torch::kInt16).reshape({3, 1}));
  data::write_idx(seed("idx", "int32-2.idx"), torch::tensor({-70000, 70000}, torch::kInt32));
  data::write_idx(seed("idx", "float32-2x2.idx"),
                  torch::tensor({0.5f, -1.0f, 2.0f, 3.5f}).reshape({2, 2}));
  data::write_idx(seed("idx", "float64-1.idx"), torch::tensor({1e-3}, torch::kDouble));
}

void nifti_seeds() {
  data::Volume v;
  v.data = torch::arange(60, torch::kFloat).reshape({3, 4, 5});
  v.spacing = {1.0f, 1.5f, 2.0f};
  auto write = [&](const std::string& name, data::NiftiType type, float slope = 0.0f) {
    data::NiftiWriteOptions o;
    o.type = type;
    o.scl_slope = slope;
    data::write_nifti(seed("nifti", name).string(), v, o);
  };
  write("uint8.nii", data::NiftiType::kUInt8);
  write("int16.nii", data::NiftiType::kInt16);
  write("float32.nii.gz", data::NiftiType::kFloat32);
  write("float64-scaled.nii", data::NiftiType::kFloat64, 0.5f);
  write("uint16.nii", data::NiftiType::kUInt16);
}

checkpoint::ShardRecord shard_record(int stage) {
  checkpoint::ShardRecord r;
  r.file = "stage-" + std::to_string(stage) + ".pt";
  r.stage = stage;
  r.layers = {"dense" + std::to_string(stage)};
  r.bytes = 1234;
  r.crc32 = 0x89abcdef;
  r.optimizer = "adam";
  return r;
}

void manifest_seeds() {
  checkpoint::Manifest m;
  m.state = {20, 1, 128, 7};
  m.fingerprint.model = "mlp";
  m.fingerprint.layers = {
      {"dense0", {{"dense0.weight", {4, 3}, "Float", false}, {"dense0.bias", {4}, "Float", false}}},
      {"norm", {{"norm.running_mean", {4}, "Float", true}}},
      {"flatten", {}}};
  m.balance = {2, 1};
  m.stage_device = {0, 1};
  m.devices = {"cpu:0", "cpu:1"};
  m.shards = {shard_record(0), shard_record(1)};
  write_text(seed("manifest", "manifest.json"), checkpoint::to_json_text(m));
  write_text(seed("manifest", "stage-1.json"),
             checkpoint::shard_record_to_json_text(shard_record(1)));
}

void tensor_file_seeds() {
  checkpoint::detail::StageTensors t;
  t.params["dense0.weight"] = torch::arange(12, torch::kFloat).reshape({4, 3});
  t.params["dense0.bias"] = torch::zeros({4});
  t.buffers["norm.running_mean"] = torch::ones({4}, torch::kDouble);
  t.optimizer["dense0.bias"] = {{"exp_avg", torch::full({4}, 0.5f)}, {"step", torch::tensor(3L)}};
  t.optimizer_kind = "adam";
  const std::vector<char> shard = checkpoint::detail::encode_shard(t);
  write_text(seed("shard", "stage-0.pt"), std::string(shard.begin(), shard.end()));
  checkpoint::save_state_dict_file(
      {{"dense0.weight", torch::arange(6, torch::kFloat).reshape({2, 3})},
       {"dense0.bias", torch::zeros({2})},
       {"steps", torch::tensor({1L, 2L})}},
      seed("state_dict", "consolidated.pt").string());
  checkpoint::save_state_dict_file(
      {{"a", torch::ones({1}, torch::kDouble)}, {"b", torch::zeros({0, 2})}},
      seed("state_dict", "small.pt").string());
}

#ifdef TANDEM_WITH_MPI
void wire_seeds() {
  auto write = [](const std::string& name, const mpi::WireHeader& h) {
    const std::vector<char> bytes = mpi::encode_header(h);
    write_text(seed("wire_header", name), std::string(bytes.begin(), bytes.end()));
  };
  mpi::WireHeader h;
  h.key.tensor = "block0.dense0";
  h.key.step = 3;
  h.key.microbatch = 1;
  h.key.from_stage = 0;
  h.key.to_stage = 1;
  h.sizes = {4, 16};
  h.nbytes = 4 * 16 * 4;
  write("activation", h);
  h.key.gradient = true;
  h.key.from_stage = 1;
  h.key.to_stage = 0;
  write("gradient", h);
  h.dtype = c10::ScalarType::BFloat16;
  h.sizes = {};
  h.nbytes = 2;
  write("bfloat16-scalar", h);
  h.dtype = c10::ScalarType::Double;
  h.sizes = {0, 3};
  h.nbytes = 0;
  write("empty", h);
}
#endif

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: fuzz_seeds CORPUS_FOLDER (fuzz/corpus)\n");
    return 2;
  }
  root = argv[1];
  idx_seeds();
  nifti_seeds();
  manifest_seeds();
  tensor_file_seeds();
#ifdef TANDEM_WITH_MPI
  wire_seeds();
#endif
  return 0;
}
