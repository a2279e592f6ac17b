// --normalize for every data kind: what each mode gives the model, each kind's default, the
// refusals, and the record a checkpoint keeps that eval and resume apply.
#include "data/normalize.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <torch/torch.h>
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <string>

#include "data/moments.h"
#include "error_of.h"
#include "scratch.h"
#include "tandem/checkpoint/all.h"
#include "tandem/common/check.h"
#include "tandem/data/idx.h"
#include "tandem/data/nifti_folder.h"
#include "tandem/data/npy.h"
#include "tandem/train/npy_source.h"
#include "tandem/train/trainer.h"
#include "tandem/train/volume_source.h"

namespace tandem {
namespace {

using data::Normalization;
using data::Normalize;

std::string temp_dir(const std::string& name) {
  const std::string dir = testing::scratch_path("tandem_normalize_", name);
  ::mkdir(dir.c_str(), 0755);
  return dir;
}

void save_npy(const std::string& path, const torch::Tensor& array) {
  std::ofstream(path, std::ios::binary) << data::npy_bytes(array);
}

// Eight 2x2 images of bytes (MNIST's files), four held out.
std::string mnist_dir() {
  const std::string dir = temp_dir("mnist");
  for (auto [prefix, n] : {std::pair<std::string, int64_t>{"train", 8}, {"t10k", 4}}) {
    data::write_idx(dir + "/" + prefix + "-images-idx3-ubyte",
                    torch::arange(n * 4).mul(37).remainder(251).view({n, 2, 2}).to(torch::kUInt8));
    data::write_idx(dir + "/" + prefix + "-labels-idx1-ubyte",
                    torch::arange(n).remainder(10).to(torch::kUInt8));
  }
  return dir;
}

// Twelve samples of 3x4 features far from standardized, labels 0..2, six held out.
std::string npy_dir(const std::string& name) {
  const std::string dir = temp_dir(name);
  torch::manual_seed(3);
  for (auto [split, n] : {std::pair<std::string, int64_t>{"train", 12}, {"test", 6}}) {
    save_npy(dir + "/" + split + "_x.npy", torch::randn({n, 3, 4}) * 3 + 5);
    save_npy(dir + "/" + split + "_y.npy", torch::arange(n).remainder(3));
  }
  return dir;
}

torch::Tensor pixels(const std::string& dir, const char* file, int64_t n) {
  return data::read_idx(dir + "/" + file).view({n, 1, 2, 2}).to(torch::kFloat32).div_(255.0f);
}

TEST(Normalize, MnistModes) {
  const std::string dir = mnist_dir();
  const torch::Tensor train = pixels(dir, "train-images-idx3-ubyte", 8);
  const torch::Tensor test = pixels(dir, "t10k-images-idx3-ubyte", 4);
  // none: the pixels /255, as torchvision's ToTensor reads them.
  auto none = train::make_image_source("mnist", dir, 0, {Normalize::kNone});
  EXPECT_TRUE(torch::equal(none->test_batch(0, 4).input, test));
  EXPECT_NE(none->describe().find("pixels /255, then not standardized"), std::string::npos);
  // dataset (the default): the training pixels' moments, in float32 as always.
  auto dataset = train::make_image_source("mnist", dir, 0);
  const Normalization n = dataset->normalization();
  EXPECT_EQ(n.mode, Normalize::kDataset);
  EXPECT_TRUE(n.in_float32);
  const data::Moments m = data::moments(train);
  EXPECT_EQ(n.mean, std::vector<double>{m.mean});
  EXPECT_EQ(n.deviation, std::vector<double>{m.stddev});
  EXPECT_TRUE(torch::equal(dataset->test_batch(0, 4).input, (test - m.mean) / m.stddev));
  // per-image: each image by its own.
  auto per_image = train::make_image_source("mnist", dir, 0, {Normalize::kPerImage});
  const torch::Tensor x = per_image->test_batch(0, 4).input;
  for (int64_t i = 0; i < 4; ++i) EXPECT_TRUE(torch::equal(x[i], data::standardized(test[i])));
  // Moments given (a checkpoint's) are used instead of the training pixels'.
  auto given =
      train::make_image_source("mnist", dir, 0, {Normalize::kDataset, false, {0.5}, {0.25}});
  EXPECT_TRUE(torch::equal(given->test_batch(0, 4).input, (test - 0.5) / 0.25));
}

TEST(Normalize, NpyModes) {
  const std::string dir = npy_dir("npy_modes");
  const train::ModelNeeds needs;  // classes
  const torch::Tensor raw = data::read_npy(dir + "/test_x.npy");
  const torch::Tensor train_x = data::read_npy(dir + "/train_x.npy").to(torch::kFloat64);
  auto none = train::make_npy_source(dir, needs, 0, {Normalize::kNone});
  EXPECT_TRUE(torch::equal(none->test_batch(0, 6).input, raw));
  auto dataset = train::make_npy_source(dir, needs, 0);
  const data::Moments m = data::moments(train_x);
  EXPECT_EQ(dataset->normalization(),
            (Normalization{Normalize::kDataset, false, {m.mean}, {m.stddev}}));
  EXPECT_TRUE(torch::equal(dataset->test_batch(0, 6).input,
                           ((raw.to(torch::kFloat64) - m.mean) / m.stddev).to(torch::kFloat32)));
  auto per_image = train::make_npy_source(dir, needs, 0, {Normalize::kPerImage});
  const torch::Tensor x = per_image->test_batch(0, 6).input;
  for (int64_t i = 0; i < 6; ++i)
    EXPECT_TRUE(torch::equal(x[i], data::standardized(raw[i].reshape({1, -1})).view({3, 4})));
}

TEST(Normalize, VolumeKindsDefaultsAndRefusals) {
  auto spheres = train::make_volume_source("spheres", 8, 1, 3, 4, 2);
  EXPECT_EQ(spheres->normalization().mode, Normalize::kNone);
  auto each = train::make_volume_source("spheres", 8, 1, 3, 4, 2, "", {Normalize::kPerImage});
  const torch::Tensor as_generated = spheres->test_batch(0, 2).input;
  const torch::Tensor x = each->test_batch(0, 2).input;
  for (int64_t i = 0; i < 2; ++i)
    EXPECT_TRUE(torch::equal(x[i], data::standardized(as_generated[i])));
  EXPECT_NE(each->describe().find("each image standardized per channel"), std::string::npos);
  EXPECT_EQ(error_of([] {
              train::make_volume_source("spheres", 8, 1, 3, 4, 2, "", {Normalize::kDataset});
            }),
            "spheres cannot be standardized with a data set's moments: its samples are generated "
            "as they are drawn; use --normalize per-image or none");
  if (std::ifstream(std::string(train::kDefaultMriDir) + "/ch2.nii.gz").good()) {
    auto mri = train::make_volume_source("mri", 16, 1, 2, 4, 2);
    EXPECT_EQ(mri->normalization(), (Normalization{Normalize::kPerImage, true}));
    auto stored = train::make_volume_source("mri", 16, 1, 2, 4, 2, "", {Normalize::kNone});
    EXPECT_EQ(stored->normalization().mode, Normalize::kNone);
    EXPECT_GT(stored->test_batch(0, 1).input.max().item<double>(), 10.0);  // the scan's units
    EXPECT_THROW(train::make_volume_source("mri", 16, 1, 2, 4, 2, "", {Normalize::kDataset}),
                 Error);
  }
}

train::Config npy_config(const std::string& dir) {
  train::Config c;
  c.model = "mlp";
  c.width = 8;
  c.classes = 3;
  c.data = "npy:" + dir;
  c.devices = "1";
  c.batch = 4;
  c.microbatches = 1;
  c.steps = 1;
  c.progress = trace::Progress::Mode::kNone;
  return c;
}

// A checkpoint records the normalization with the moments it measured; eval of it applies them
// (not train_x's of now), a --normalize that differs is refused, and so is a resume with one.
TEST(Normalize, CheckpointsRecordItAndEvalAndResumeApplyIt) {
  const std::string dir = npy_dir("npy_record");
  train::Config c = npy_config(dir);
  c.save_dir = dir + "/ckpt";
  train::Trainer(c).run();
  const Normalization recorded =
      checkpoint::read_manifest(checkpoint::resolve_checkpoint(c.save_dir)).state.normalization;
  const data::Moments m = data::moments(data::read_npy(dir + "/train_x.npy").to(torch::kFloat64));
  EXPECT_EQ(recorded, (Normalization{Normalize::kDataset, false, {m.mean}, {m.stddev}}));

  save_npy(dir + "/train_x.npy", data::read_npy(dir + "/train_x.npy") * 3 + 1);
  train::Config e = npy_config(dir);
  e.init_from = c.save_dir;
  e.eval_only = true;
  train::Trainer eval(e);
  EXPECT_EQ(eval.source().normalization(), recorded);
  EXPECT_NE(eval.source().describe().find("standardized with the training inputs' mean"),
            std::string::npos);
  e.normalize.mode = Normalize::kNone;
  EXPECT_NE(error_of([&] {
              train::Trainer{e};
            }).find("was trained on inputs standardized with the training inputs' mean"),
            std::string::npos);

  train::Config r = npy_config(dir);
  r.save_dir = c.save_dir;
  r.resume = c.save_dir;
  r.steps = 2;
  r.normalize.mode = Normalize::kPerImage;
  EXPECT_NE(error_of([&] { train::Trainer{r}; }).find("a resumed run applies the same"),
            std::string::npos);
  r.normalize = {};
  train::Trainer resumed(r);
  EXPECT_EQ(resumed.source().normalization(), recorded);
}

// A checkpoint of a data set this process does not know (a program's own, registered there)
// records nothing that applies here: eval on npy:DIR takes npy's own default.
TEST(Normalize, ACheckpointOfAnotherDataSetAppliesNothing) {
  const std::string dir = npy_dir("npy_other_kind");
  train::Config c = npy_config(dir);
  c.save_dir = dir + "/ckpt";
  train::Trainer(c).run();
  const std::string manifest = checkpoint::resolve_checkpoint(c.save_dir) + "/manifest.json";
  std::ifstream in(manifest);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string from = "\"data\": \"npy:" + dir + "\"";
  ASSERT_NE(text.find(from), std::string::npos) << text;
  text.replace(text.find(from), from.size(), "\"data\": \"my-own-set\"");
  std::ofstream(manifest) << text;
  train::Config e = npy_config(dir);
  e.init_from = c.save_dir;
  e.eval_only = true;
  e.normalize.mode = Normalize::kNone;  // would be refused against a record that applies
  train::Trainer eval(e);
  EXPECT_EQ(eval.source().normalization().mode, Normalize::kNone);
}

}  // namespace
}  // namespace tandem
