// A 3D U-Net of one's own (residual blocks, its own loss) trained by tandem's trainer on crops of
// a real T1 MRI (Debian's mricron-data) in 2 pipeline stages, with the split chosen by measured
// memory, checkpoints, resume and evaluation:
//
//   ./custom_unet SAVE_DIR [steps]     trains to `steps` (default 40), saving every 10; run
//                                      again with more steps, it resumes from SAVE_DIR
//   mpirun -n 2 ./custom_unet SAVE_DIR [steps]     the same, one stage per rank
//
// Shapes: B batch, C channels, D,H,W volume. Input [B,1,32,32,32], output logits [B,1,32,32,32],
// target a 0/1 brain mask.
#include <tandem/checkpoint/load.h>
#include <tandem/common/cpu_kernels.h>
#include <tandem/common/device.h>
#include <tandem/graph/module_layer.h>
#include <tandem/train/catalog.h>
#include <tandem/train/job.h>
#include <torch/nn/functional/loss.h>
#include <torch/nn/functional/upsampling.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/pooling.h>

#include <cstdio>
#include <string>

using namespace tandem;

// relu(conv(relu(conv(x))) + shortcut(x)): 3x3x3 "same" convolutions, a 1x1x1 shortcut when the
// channels change.
struct ResBlockImpl : torch::nn::Cloneable<ResBlockImpl> {
  ResBlockImpl(int64_t in, int64_t out) : in_(in), out_(out) { reset(); }
  void reset() override {
    conv0 = register_module("conv0",
                            torch::nn::Conv3d(torch::nn::Conv3dOptions(in_, out_, 3).padding(1)));
    conv1 = register_module("conv1",
                            torch::nn::Conv3d(torch::nn::Conv3dOptions(out_, out_, 3).padding(1)));
    if (in_ != out_) shortcut = register_module("shortcut", torch::nn::Conv3d(in_, out_, 1));
  }
  torch::Tensor forward(torch::Tensor x) {
    torch::Tensor y = conv1(torch::relu(conv0(x)));
    return torch::relu(y + (shortcut ? shortcut(x) : x));
  }
  int64_t in_, out_;
  torch::nn::Conv3d conv0{nullptr}, conv1{nullptr}, shortcut{nullptr};
};
TORCH_MODULE(ResBlock);

// A decoder level: up-sample the level below by 2 (nearest), join the encoder's skip along C,
// and a residual block. Two inputs: (below [B,2F,D/2,..], skip [B,F,D,..]) -> [B,F,D,..].
struct UpImpl : torch::nn::Cloneable<UpImpl> {
  UpImpl(int64_t below, int64_t skip) : below_(below), skip_(skip) { reset(); }
  void reset() override { block = register_module("block", ResBlock(below_ + skip_, skip_)); }
  torch::Tensor forward(torch::Tensor below, torch::Tensor skip) {
    namespace F = torch::nn::functional;
    const torch::Tensor up = F::interpolate(below, F::InterpolateFuncOptions()
                                                       .scale_factor(std::vector<double>{2, 2, 2})
                                                       .mode(torch::kNearest));
    return block(torch::cat({up, skip}, 1));
  }
  int64_t below_, skip_;
  ResBlock block{nullptr};
};
TORCH_MODULE(Up);

// Soft Dice on the sigmoid of the logits plus binary cross-entropy, per micro-batch.
torch::Tensor dice_bce(const torch::Tensor& logits, const torch::Tensor& mask) {
  const torch::Tensor p = torch::sigmoid(logits).flatten(1), t = mask.flatten(1);
  const torch::Tensor dice = (2 * (p * t).sum(1) + 1) / (p.sum(1) + t.sum(1) + 1);
  return (1 - dice).mean() + torch::nn::functional::binary_cross_entropy_with_logits(logits, mask);
}

// Hard Dice (threshold 0.5) summed over the samples: the trainer divides by their count.
double dice_sum(const torch::Tensor& logits, const torch::Tensor& mask) {
  const torch::Tensor p = (logits > 0).to(torch::kFloat).flatten(1), t = mask.flatten(1);
  return ((2 * (p * t).sum(1) + 1) / (p.sum(1) + t.sum(1) + 1)).sum().item<double>();
}

// Three levels of F, 2F, 4F filters: the encoder's outputs e0, e1 are the skips the decoder
// reads, across stages when the split puts them apart.
graph::Model res_unet(int64_t filters) {
  const int64_t f = filters;
  graph::Model m;
  m.name = "res-unet";
  auto pool = [] { return torch::nn::MaxPool3d(torch::nn::MaxPool3dOptions(2)); };
  m.layers.push_back(graph::make_layer("enc0", ResBlock(1, f), "input", "e0"));
  m.layers.push_back(graph::make_layer("pool0", pool(), "e0", "p0"));
  m.layers.push_back(graph::make_layer("enc1", ResBlock(f, 2 * f), "p0", "e1"));
  m.layers.push_back(graph::make_layer("pool1", pool(), "e1", "p1"));
  m.layers.push_back(graph::make_layer("bottom", ResBlock(2 * f, 4 * f), "p1", "b"));
  m.layers.push_back(graph::make_layer("up1", Up(4 * f, 2 * f), {"b", "e1"}, {"d1"}));
  m.layers.push_back(graph::make_layer("up0", Up(2 * f, f), {"d1", "e0"}, {"d0"}));
  m.layers.push_back(graph::make_layer("head", torch::nn::Conv3d(f, 1, 1), "d0", "output"));
  m.loss = dice_bce;
  m.metric = dice_sum;
  m.metric_name = "dice";
  return m;
}

int main(int argc, char** argv) {
  use_portable_cpu_kernels();
  // Freed tensors' memory kept for the next ones, as the tandem program keeps it.
  keep_freed_memory();
  if (argc < 2) {
    std::fprintf(stderr, "usage: custom_unet SAVE_DIR [steps]\n");
    return 2;
  }
  train::Config c;
  c.model = "res-unet";
  c.data = "mri";  // the catalog's MRI crops
  c.volume = 32;
  c.train_samples = 256;
  c.test_samples = 8;
  c.devices = "2";  // in process; under mpirun, one device per rank
  c.stages = 2;
  c.partition =
      train::PartitionBy::kFit;  // the most even FLOPs among the splits whose measured plan fits
  c.device_memory = uint64_t{2} << 30;
  c.batch = 4;
  c.microbatches = 2;
  c.optimizer = train::OptimizerKind::kAdam;
  c.lr = 3e-3;
  c.steps = argc > 2 ? std::stoll(argv[2]) : 40;
  c.save_dir = argv[1];
  c.save_every = 10;
  c.progress = trace::Progress::Mode::kNone;
  // A save folder with checkpoints holds an earlier run of this program: continue it.
  if (!checkpoint::list_checkpoints(c.save_dir).empty()) c.resume = c.save_dir;
  train::Job job(c);
  job.agree(c);
  return job.guard([&] {
    // The catalog's data for a model of these needs: volumes, 0/1 masks, sides divisible by 4.
    train::ModelNeeds needs;
    needs.volumes = true;
    needs.target = train::ModelNeeds::Target::kMask;
    needs.divisor = 4;
    std::unique_ptr<train::Source> source = train::make_source(c, needs);
    torch::manual_seed(c.seed);
    std::unique_ptr<train::Trainer> trainer = job.trainer(c, res_unet(8), std::move(source));
    if (job.rank() == 0) std::printf("%s", trainer->memory_plan().c_str());
    const train::Result r = trainer->run();
    if (trainer->pipeline().owns_loss())
      std::printf("%scustom_unet: steps=%lld loss=%.4f test_dice=%.4f\n", job.prefix().c_str(),
                  static_cast<long long>(r.steps), r.loss, r.test_metric);
  });
}
