// What load refuses (damaged files, another model) and how the save directory is kept (keep K,
// the `latest` pointer, temporary folders, saving one step twice).
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>

#include "checkpoint/optimizer_state.h"
#include "common/output_path.h"
#include "helpers.h"
#include "tandem/checkpoint/all.h"

namespace tandem::checkpoint {
namespace {

using namespace testing;
namespace fs = std::filesystem;

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void spit(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

std::vector<std::string> entries(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

// A save directory holding step-2 (2 stages); the test damages it.
struct Saved {
  TempDir dir;
  Recipe setup;
  std::string checkpoint;
  std::map<std::string, torch::Tensor> params;
  Saved() {
    auto p = make_pipeline(setup);
    train_until(*p, 2);
    checkpoint = save(*p, {2, 0, 16, 5}, dir.path());
    params = snapshot(*p);
  }
  // A new pipeline must refuse to load and keep its own parameters.
  template <typename... Parts>
  void expect_refused(Parts... parts) {
    Recipe other = setup;
    other.init_seed = 99;
    auto p = make_pipeline(other);
    const auto before = snapshot(*p);
    EXPECT_THROW_WITH(load(*p, dir.path()), parts...);
    expect_bitwise_equal(snapshot(*p), before);
  }
};

TEST(Integrity, LayoutOfASaveDirectory) {
  Saved s;
  EXPECT_EQ(s.checkpoint, s.dir / "step-2");
  EXPECT_EQ(entries(s.dir.path()), (std::vector<std::string>{"latest", "step-2"}));
  EXPECT_EQ(entries(s.checkpoint),
            (std::vector<std::string>{"manifest.json", "stage-0.json", "stage-0.pt", "stage-1.json",
                                      "stage-1.pt"}));
  EXPECT_EQ(slurp(s.dir / "latest"), "step-2\n");
  const Manifest m = verify(s.checkpoint);
  EXPECT_EQ(m.state.step, 2);
  EXPECT_EQ(m.balance, (std::vector<int>{3, 3}));
  EXPECT_EQ(m.stage_device, (std::vector<int>{0, 1}));
  EXPECT_EQ(m.devices, (std::vector<std::string>{"cpu:0", "cpu:1"}));
  ASSERT_EQ(m.shards.size(), 2u);
  EXPECT_EQ(m.shards[1].layers, (std::vector<std::string>{"block0.dense1", "dropout", "logits"}));
  EXPECT_EQ(m.shards[0].optimizer, "adam");
  EXPECT_EQ(m.shards[0].bytes, static_cast<int64_t>(fs::file_size(s.dir / "step-2/stage-0.pt")));
  EXPECT_EQ(m.fingerprint.layers.size(), 6u);
  EXPECT_EQ(m.fingerprint.layers[1].tensors[0].shape, (std::vector<int64_t>{16, 12}));
}

TEST(Integrity, TruncatedShardIsRefused) {
  Saved s;
  const std::string shard = s.dir / "step-2/stage-1.pt";
  const std::string bytes = slurp(shard);
  spit(shard, bytes.substr(0, bytes.size() / 2));
  s.expect_refused("stage-1.pt", "truncated", std::to_string(bytes.size()).c_str());
}

TEST(Integrity, FlippedByteIsRefused) {
  Saved s;
  const std::string shard = s.dir / "step-2/stage-0.pt";
  std::string bytes = slurp(shard);
  bytes[bytes.size() / 2] ^= 0x40;
  spit(shard, bytes);
  s.expect_refused("stage-0.pt", "corrupted", "CRC-32");
}

// A shard whose size and checksum are right (written so, not damaged on the way) but whose
// tensor reaches past its storage: refused before anything is loaded.
TEST(Integrity, AShardTensorReachingPastItsStorageIsRefused) {
  Saved s;
  const std::string shard = s.dir / "step-2/stage-0.pt";
  const std::string original = slurp(shard);
  c10::Dict<c10::IValue, c10::IValue> dict =
      torch::pickle_load(std::vector<char>(original.begin(), original.end())).toGenericDict();
  const torch::Tensor weight = dict.at("param/dense0.weight").toTensor();
  torch::Tensor crafted = torch::zeros({1});  // a 4-byte storage described as the whole weight
  crafted.unsafeGetTensorImpl()->set_sizes_contiguous(weight.sizes());
  dict.insert_or_assign("param/dense0.weight", crafted);
  const std::vector<char> bytes = torch::pickle_save(c10::IValue(dict));
  spit(shard, std::string(bytes.begin(), bytes.end()));
  Manifest m = read_manifest(s.dir / "step-2");
  m.shards[0].bytes = static_cast<int64_t>(bytes.size());
  m.shards[0].crc32 = crc32(bytes.data(), bytes.size());
  spit(s.dir / "step-2/manifest.json", to_json_text(m));
  s.expect_refused("stage-0.pt", "'param/dense0.weight' of shape",
                   "which reaches past the 4 bytes of its storage");
}

TEST(Integrity, MissingShardIsRefused) {
  Saved s;
  fs::remove(s.dir / "step-2/stage-0.pt");
  s.expect_refused("stage-0.pt", "missing", "step-2");
}

TEST(Integrity, DamagedManifestIsRefused) {
  Saved s;
  const std::string manifest = s.dir / "step-2/manifest.json";
  spit(manifest, slurp(manifest).substr(0, 100));
  s.expect_refused("manifest.json", "not a valid checkpoint manifest");
}

TEST(Integrity, AnotherModelIsRefusedNamingTheDifference) {
  Saved s;
  s.setup.width = 32;
  s.expect_refused("another model",
                   "'dense0.weight' has shape [16, 12] in the checkpoint but [32, 12]");
  s.setup.width = 16;
  s.setup.blocks = 2;
  s.setup.balance = {4, 4};
  s.expect_refused("another model", "layer 4 is 'dropout' in the checkpoint but 'block1.dense0'");
}

TEST(Integrity, FingerprintDifferences) {
  Recipe s;
  Fingerprint a = fingerprint(small_mlp(s));
  EXPECT_EQ(first_difference(a, a), "");
  Fingerprint b = a;
  b.model = "unet";
  EXPECT_NE(first_difference(a, b).find("model 'mlp' but this model is 'unet'"), std::string::npos);
  b = a;
  b.layers.pop_back();
  EXPECT_NE(first_difference(a, b).find("6 layers but this model has 5 (layer 'logits' is only in "
                                        "the checkpoint)"),
            std::string::npos);
  b = a;
  b.layers[1].tensors[1].dtype = "double";
  EXPECT_NE(first_difference(a, b).find("'dense0.bias' is Float in the checkpoint but double"),
            std::string::npos);
}

// Under MPI rank 0 makes the temporary folder and every rank writes its shards into it: a rank
// that cannot see it (a save folder on a node-local disk) says so.
TEST(Integrity, ARankThatCannotSeeTheSaveFolderSaysSo) {
  TempDir dir;
  auto p = make_pipeline(Recipe{});
  train_until(*p, 1);
  SaveOptions as_rank1;
  as_rank1.world = World{1, 2, 0, 1, [] {}};
  EXPECT_THROW_WITH(save(*p, {1, 0, 8, 5}, dir.path(), as_rank1),
                    "rank 1 cannot see the folder '" + dir.path() +
                        "/.tmp-step-1' that rank 0 made for this checkpoint: the save folder "
                        "must be on a file system that every rank shares");
}

TEST(Integrity, NothingToLoad) {
  TempDir dir;
  auto p = make_pipeline(Recipe{});
  EXPECT_THROW_WITH(load(*p, dir.path()), "holds no complete checkpoint");
  EXPECT_THROW_WITH(load(*p, dir / "nowhere"), "no such folder");
  fs::create_directory(dir / ".tmp-step-4");
  fs::create_directory(dir / "step-5");  // no manifest: not complete
  EXPECT_EQ(latest_checkpoint(dir.path()), "");
  EXPECT_THROW_WITH(load(*p, dir / "step-5"), "has no manifest.json");
}

TEST(Integrity, KeepRemovesOnlyOlderCompleteCheckpoints) {
  TempDir dir;
  auto p = make_pipeline(Recipe{});
  fs::create_directories(dir / ".tmp-step-99");  // a save that died
  for (int64_t step = 1; step <= 4; ++step) {
    train_until(*p, step);
    save(*p, {step, 0, step * 8, 5}, dir.path(), keep(2));
  }
  EXPECT_EQ(entries(dir.path()), (std::vector<std::string>{"latest", "step-3", "step-4"}));
  EXPECT_EQ(list_checkpoints(dir.path()),
            (std::vector<std::string>{dir / "step-3", dir / "step-4"}));
  train_until(*p, 5);
  save(*p, {5, 0, 40, 5}, dir.path(), keep(0));
  EXPECT_EQ(list_checkpoints(dir.path()).size(), 3u);
}

TEST(Integrity, SavingAStepAgainReplacesIt) {
  TempDir dir;
  auto p = make_pipeline(Recipe{});
  train_until(*p, 2);
  save(*p, {2, 0, 16, 5}, dir.path());
  // Same step, other values (as after resuming from an earlier checkpoint with other data).
  {
    torch::NoGradGuard g;
    p->named_parameters().front().second.add_(1.0);
  }
  save(*p, {2, 1, 0, 5}, dir.path());
  EXPECT_EQ(entries(dir.path()), (std::vector<std::string>{"latest", "step-2"}));
  auto q = make_pipeline(Recipe{});
  EXPECT_EQ(load(*q, dir.path()).epoch, 1);
  expect_bitwise_equal(snapshot(*q), snapshot(*p));
}

TEST(Integrity, LatestPointerWinsAndADanglingOneFallsBack) {
  TempDir dir;
  auto p = make_pipeline(Recipe{});
  for (int64_t step = 1; step <= 3; ++step) {
    train_until(*p, step);
    save(*p, {step, 0, step * 8, 5}, dir.path(), keep(0));
  }
  spit(dir / "latest", "step-2\n");  // e.g. rolled back by hand
  EXPECT_EQ(latest_checkpoint(dir.path()), dir / "step-2");
  spit(dir / "latest", "step-7\n");
  EXPECT_EQ(latest_checkpoint(dir.path()), dir / "step-3");
  spit(dir / "latest", "../elsewhere\n");
  EXPECT_EQ(latest_checkpoint(dir.path()), dir / "step-3");
  fs::remove(dir / "latest");
  EXPECT_EQ(latest_checkpoint(dir.path()), dir / "step-3");
  auto q = make_pipeline(Recipe{});
  EXPECT_EQ(load(*q, dir / "step-1").step, 1);
}

TEST(Integrity, BarrierIsCalledAtEachPhaseAndHooksInOrder) {
  TempDir dir;
  auto p = make_pipeline(Recipe{});
  SaveOptions o;
  int barriers = 0;
  std::vector<std::string> points;
  o.world.barrier = [&] { ++barriers; };
  o.hook = [&](SavePoint pt, const std::string& folder) {
    points.push_back(std::string(to_string(pt)) + " " + fs::path(folder).filename().string());
  };
  save(*p, {0, 0, 0, 5}, dir.path(), o);
  EXPECT_EQ(barriers, 3);
  EXPECT_EQ(points,
            (std::vector<std::string>{"shards-written .tmp-step-0", "manifest-written .tmp-step-0",
                                      "renamed step-0", "latest-written step-0"}));
}

TEST(Integrity, ReplicasOtherThanTheFirstWriteNoShards) {
  // A process of replica 1 writes nothing; its rank-0 peer would. Rank 1 does not write the
  // manifest either, so the folder stays temporary.
  TempDir dir;
  auto p = make_pipeline(Recipe{});
  SaveOptions o;
  o.world = {1, 2, 1, 2, nullptr};
  fs::create_directories(dir / ".tmp-step-0");
  save(*p, {0, 0, 0, 5}, dir.path(), o);
  EXPECT_TRUE(fs::is_empty(dir / ".tmp-step-0"));
  EXPECT_FALSE(fs::exists(dir / "step-0"));
  o.world = {3, 2, 0, 1, nullptr};
  EXPECT_THROW_WITH(save(*p, {0, 0, 0, 5}, dir.path(), o), "rank 3 of 2");
}

TEST(Files, Crc32AndWholeWrite) {
  const std::string check = "123456789";
  EXPECT_EQ(crc32(check.data(), check.size()), 0xcbf43926u);
  EXPECT_EQ(crc32_hex(0xcbf43926u), "0xcbf43926");
  TempDir dir;
  write_output_file(dir / "f", "one");
  write_output_file(dir / "f", "two");
  EXPECT_EQ(slurp(dir / "f"), "two");
  EXPECT_EQ(entries(dir.path()), (std::vector<std::string>{"f"}));
  EXPECT_THROW_WITH(read_file(dir / "none"), "cannot open", "none");
}

// A device would be read until memory runs out (/dev/zero), a pipe until a writer comes.
TEST(Files, ReadingRefusesWhatIsNotARegularFile) {
  TempDir dir;
  ASSERT_EQ(::mkfifo((dir / "pipe").c_str(), 0600), 0);
  EXPECT_THROW_WITH(read_file(dir / "pipe"), "is not a regular file", "pipe");
  struct stat st {};
  if (::stat("/dev/zero", &st) != 0 || !S_ISCHR(st.st_mode))
    GTEST_SKIP() << "/dev/zero is not a character device here";
  EXPECT_THROW_WITH(read_file("/dev/zero"), "'/dev/zero' is not a regular file");
}

TEST(Files, ManifestRoundTrip) {
  Manifest m;
  m.state = {7, 1, 64, 42};
  m.fingerprint = fingerprint(small_mlp(Recipe{}));
  m.balance = {3, 3};
  m.stage_device = {0, 1};
  m.devices = {"cpu:0", "cpu:1"};
  m.replicas = 2;
  m.ranks = 4;
  m.shards.push_back({"stage-0.pt", 0, {"flatten", "dense0"}, 123, 0xdeadbeef, "sgd"});
  const Manifest r = parse_manifest(to_json_text(m), "m.json");
  EXPECT_EQ(to_json_text(r), to_json_text(m));
  EXPECT_EQ(r.shards[0].crc32, 0xdeadbeefu);
  EXPECT_EQ(r.state.seed, 42u);
  EXPECT_THROW_WITH(parse_manifest("{\"format\": \"other\"}", "x.json"), "x.json",
                    "not a tandem checkpoint manifest");
}

// The moments a run standardized with come back as the same doubles (decimal strings: the
// manifest holds whole numbers only), and a damaged one is named.
TEST(Files, ManifestKeepsTheNormalizationExactly) {
  Manifest m;
  m.fingerprint = fingerprint(small_mlp(Recipe{}));
  m.state.normalization = {data::Normalize::kDataset,
                           false,
                           {0.1, 1.0 / 3, -1e-300},
                           {0.3081078038564622, 5e-324, 1e300}};
  m.state.normalization.in_float32 = true;
  const std::string text = to_json_text(m);
  EXPECT_EQ(parse_manifest(text, "m.json").state.normalization, m.state.normalization);
  m.state.normalization = {data::Normalize::kPerImage, true};
  EXPECT_EQ(parse_manifest(to_json_text(m), "m.json").state.normalization, m.state.normalization);
  std::string damaged = text;
  damaged.replace(damaged.find("\"0.1\""), 5, "\"0.x\"");
  EXPECT_THROW_WITH(parse_manifest(damaged, "d.json"), "d.json",
                    "holds '0.x' as a normalization mean, not a number");
}

}  // namespace
}  // namespace tandem::checkpoint
