// A model and a data source defined here, outside tandem's sources, train through the trainer
// with its options (stages, schedules, checkpoints and resume, memory fit) and give bitwise the
// results of the same model and source registered in the catalog and chosen by name.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "../data/expect_error.h"
#include "scratch.h"
#include "tandem/graph/module_layer.h"
#include "tandem/train/catalog.h"
#include "tandem/train/job.h"
#include "tandem/train/observers.h"
#include "tandem/train/trainer.h"

namespace tandem {
namespace {

// relu(W x + b): a module of one's own.
struct DenseReluImpl : torch::nn::Cloneable<DenseReluImpl> {
  DenseReluImpl(int64_t in, int64_t out) : in_(in), out_(out) { reset(); }
  void reset() override { fc = register_module("fc", torch::nn::Linear(in_, out_)); }
  torch::Tensor forward(torch::Tensor x) { return torch::relu(fc(x)); }
  int64_t in_, out_;
  torch::nn::Linear fc{nullptr};
};
TORCH_MODULE(DenseRelu);

// relu(W x + b) + skip: a forward of two tensors.
struct ResidualImpl : torch::nn::Cloneable<ResidualImpl> {
  explicit ResidualImpl(int64_t width) : width_(width) { reset(); }
  void reset() override { fc = register_module("fc", torch::nn::Linear(width_, width_)); }
  torch::Tensor forward(torch::Tensor x, torch::Tensor skip) { return torch::relu(fc(x)) + skip; }
  int64_t width_;
  torch::nn::Linear fc{nullptr};
};
TORCH_MODULE(Residual);

constexpr int64_t kFeatures = 16, kWidth = 8, kClasses = 2;

// input [B,16] -> dense0 -> h0 -> dense1 -> h1 -> res(h1, h0) -> h2 -> logits: the skip h0 crosses
// from the first stage to the second when the model is split in two.
graph::Model own_model() {
  graph::Model m;
  m.name = "own";
  m.layers.push_back(graph::make_layer("dense0", DenseRelu(kFeatures, kWidth), "input", "h0"));
  m.layers.push_back(graph::make_layer("dense1", DenseRelu(kWidth, kWidth), "h0", "h1"));
  m.layers.push_back(graph::make_layer("res", Residual(kWidth), {"h1", "h0"}, {"h2"}));
  m.layers.push_back(
      graph::make_layer("logits", torch::nn::Linear(kWidth, kClasses), "h2", "output"));
  m.loss = [](const torch::Tensor& logits, const torch::Tensor& labels) {
    return torch::nn::functional::cross_entropy(logits, labels);
  };
  m.metric = [](const torch::Tensor& logits, const torch::Tensor& labels) {
    return logits.argmax(1).eq(labels).sum().item<double>();
  };
  return m;
}

// Points in 16 dimensions labelled by the sign of their sum; an epoch visits them in an order of
// its own.
class BlobSource : public train::Source {
 public:
  int64_t train_size() const override { return 32; }
  int64_t test_size() const override { return 8; }
  train::Batch train_batch(int64_t epoch, int64_t begin, int64_t end) const override {
    std::vector<int64_t> ids;
    for (int64_t i = begin; i < end; ++i) ids.push_back((i * 7 + epoch * 3) % train_size());
    return samples(ids);
  }
  train::Batch test_batch(int64_t begin, int64_t end) const override {
    std::vector<int64_t> ids;
    for (int64_t i = begin; i < end; ++i) ids.push_back(train_size() + i);
    return samples(ids);
  }
  std::string describe() const override { return "blobs"; }
  std::vector<int64_t> input_shape() const override { return {kFeatures}; }

 private:
  static train::Batch samples(const std::vector<int64_t>& ids) {
    const auto n = static_cast<int64_t>(ids.size());
    torch::Tensor x = torch::empty({n, kFeatures});
    torch::Tensor y = torch::empty({n}, torch::kInt64);
    for (int64_t r = 0; r < n; ++r) {
      double sum = 0;
      for (int64_t j = 0; j < kFeatures; ++j) {
        const double v = std::sin(0.37 * static_cast<double>(ids[r] * kFeatures + j) + 0.2);
        x[r][j] = v;
        sum += v;
      }
      y[r] = sum > 0 ? 1 : 0;
    }
    return {x, y};
  }
};

// The same model and source in the catalog, as "test-own" and "test-blobs".
void register_own() {
  static const bool done = [] {
    train::ModelKind m;
    m.name = "test-own";
    m.summary = "the model of tests/train/custom_model_test.cc";
    m.needs = [](const train::Config&) {
      train::ModelNeeds n;
      n.classes = kClasses;
      return n;
    };
    m.make = [](const train::Config&, const std::vector<int64_t>&) { return own_model(); };
    train::register_model(m);
    train::DataKind d;
    d.name = "test-blobs";
    d.summary = "the source of tests/train/custom_model_test.cc";
    d.make = [](const train::Config&, const std::string&, const train::ModelNeeds&) {
      return std::make_unique<BlobSource>();
    };
    train::register_data(d);
    return true;
  }();
  (void)done;
}

train::Config config() {
  train::Config c;
  c.model = "test-own";
  c.data = "test-blobs";
  c.devices = "2";
  c.batch = 8;
  c.microbatches = 4;
  c.eval_batch = 8;
  c.steps = 4;
  c.seed = 3;
  c.progress = trace::Progress::Mode::kNone;
  return c;
}

// A trainer of the model and source defined here, given directly.
std::unique_ptr<train::Trainer> own(const train::Config& c) {
  torch::manual_seed(c.seed);
  return std::make_unique<train::Trainer>(c, own_model(), std::make_unique<BlobSource>());
}

// The same, chosen from the catalog by name.
std::unique_ptr<train::Trainer> registered(const train::Config& c) {
  register_own();
  return std::make_unique<train::Trainer>(c);
}

void expect_same_parameters(const train::Trainer& a, const train::Trainer& b) {
  const auto pa = a.pipeline().named_parameters(), pb = b.pipeline().named_parameters();
  ASSERT_EQ(pa.size(), pb.size());
  ASSERT_EQ(pa.size(), 8u);  // 4 layers, a weight and a bias each
  for (size_t i = 0; i < pa.size(); ++i) {
    EXPECT_EQ(pa[i].first, pb[i].first);
    EXPECT_TRUE(torch::equal(pa[i].second, pb[i].second)) << pa[i].first;
  }
}

void expect_same_result(const train::Result& a, const train::Result& b) {
  EXPECT_EQ(a.steps, b.steps);
  EXPECT_EQ(a.loss, b.loss);  // bitwise: the same doubles
  EXPECT_EQ(a.test_metric, b.test_metric);
}

std::string temp_dir(const std::string& name) {
  const std::string dir = testing::scratch_path("tandem_custom_", name);
  std::filesystem::remove_all(dir);
  return dir;
}

TEST(CustomModel, TrainsBitwiseAsTheSameModelFromTheCatalog) {
  for (const std::string schedule : {"1f1b", "zb-h1", "interleaved"}) {
    train::Config c = config();
    c.schedule = schedule;
    if (schedule == "interleaved") c.virtual_stages = 2;  // 4 stages: a layer each
    // Each trainer times its own layers for the default split, and two timings of layers this
    // small may split differently: the split here is the parameters', the same for both.
    c.partition = train::PartitionBy::kParameters;
    auto a = own(c);
    auto b = registered(c);
    EXPECT_EQ(a->pipeline().partition().balance(), b->pipeline().partition().balance());
    const train::Result ra = a->run(), rb = b->run();
    EXPECT_EQ(ra.steps, 4);
    EXPECT_TRUE(std::isfinite(ra.loss)) << schedule;
    expect_same_result(ra, rb);
    expect_same_parameters(*a, *b);
  }
}

TEST(CustomModel, ResumesBitwiseFromItsCheckpoint) {
  train::Config c = config();
  c.save_dir = temp_dir("whole");
  c.save_every = 2;
  c.keep = 0;
  auto whole = own(c);
  const train::Result all = whole->run();
  // Steps 3 and 4 again, from the checkpoint of step 2: as the model of one's own and as the
  // catalog's, on another split (one device).
  train::Config r = config();
  r.resume = c.save_dir + "/step-2";
  r.devices = "1";
  auto a = own(r);
  auto b = registered(r);
  expect_same_result(a->run(), all);
  expect_same_result(b->run(), all);
  expect_same_parameters(*a, *whole);
  expect_same_parameters(*b, *whole);
  // A checkpoint of another data set is refused by name.
  r.data = "mnist";
  expect_error([&] { own(r); }, {"saved from a run on Config::data = test-blobs, not mnist"});
  std::filesystem::remove_all(c.save_dir);
}

TEST(CustomModel, MemoryFitPlansAndSplitsItsLayers) {
  train::Config c = config();
  c.partition = train::PartitionBy::kFit;
  c.device_memory = uint64_t{1} << 30;
  c.steps = 2;
  auto a = own(c);
  auto b = registered(c);
  EXPECT_TRUE(a->plan_fits());
  EXPECT_NE(a->memory_plan().find("planned peaks fit"), std::string::npos) << a->memory_plan();
  EXPECT_EQ(a->pipeline().partition().balance(), b->pipeline().partition().balance());
  expect_same_result(a->run(), b->run());
  expect_same_parameters(*a, *b);
  // A budget too small for any split: the plan says so.
  c.device_memory = 64;
  c.plan_only = true;
  EXPECT_FALSE(own(c)->plan_fits());
}

// The trace, timeline and report of `tandem train --trace --timeline --report`, for the model
// of one's own on a job of one process: the report's partition and schedule are the run's.
TEST(CustomModel, TraceAndReportOfItsSteps) {
  train::Config c = config();
  c.steps = 4;
  c.transport = train::TransportKind::kInProcess;
  train::Job job(c);
  torch::manual_seed(c.seed);
  std::unique_ptr<train::Trainer> t = job.trainer(c, own_model(), std::make_unique<BlobSource>());
  const std::string dir = temp_dir("observe");
  std::filesystem::create_directories(dir);
  train::ObserveOptions o;
  o.trace = dir + "/run.json";
  o.timeline = dir + "/run.svg";
  o.report = dir + "/report.json";
  o.trace_steps = 2;
  train::check_outputs(o, *t, job);
  train::Observers observers(o, *t, job);
  int64_t calls = 0;
  const train::Result r =
      t->run([&](int64_t step, int64_t total, const runtime::StepStats& s, double samples_per_s) {
        EXPECT_EQ(step, ++calls);
        EXPECT_EQ(total, 4);
        observers.after_step(step, s, samples_per_s);
      });
  observers.finish(r, train::run_memory(job, t->pipeline(), r.peak_bytes));
  EXPECT_EQ(calls, 4);
  std::ifstream in(o.report);
  const nlohmann::json report = nlohmann::json::parse(in);
  EXPECT_EQ(report.at("traced_steps"), 2);
  EXPECT_EQ(report.at("schedule"), "1f1b");
  EXPECT_EQ(report.at("devices").size(), 2u);
  EXPECT_EQ(report.at("loss").get<double>(), r.loss);
  std::ifstream trace(o.trace);
  const nlohmann::json events = nlohmann::json::parse(trace);
  // Spans of both devices' forwards and backwards, named like the schedule's actions (1F0).
  const std::string text = events.dump();
  EXPECT_NE(text.find("\"0F0\""), std::string::npos);
  EXPECT_NE(text.find("\"1B3\""), std::string::npos);
  EXPECT_GT(std::filesystem::file_size(o.timeline), 0u);
  // An output that cannot be written is refused before the first step.
  o.report = dir + "/no/such/folder/report.json";
  expect_error([&] { train::check_outputs(o, *t, job); }, {"ObserveOptions::report"});
  std::filesystem::remove_all(dir);
}

// x -> (relu(x), -x): a forward of two outputs.
struct SplitImpl : torch::nn::Cloneable<SplitImpl> {
  void reset() override {}
  std::tuple<torch::Tensor, torch::Tensor> forward(torch::Tensor x) { return {torch::relu(x), -x}; }
};
TORCH_MODULE(Split);

TEST(CustomModel, MakeLayerTakesTheForwardsInputsAndOutputs) {
  graph::Layer split = graph::make_layer("split", Split(), {"x"}, {"pos", "neg"});
  const graph::Tensors out = split.forward({torch::tensor({-1.0f, 2.0f})});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_TRUE(torch::equal(out[1], torch::tensor({1.0f, -2.0f})));
  // A copy (another device of a spatial split) computes with its own module.
  EXPECT_TRUE(
      torch::equal(graph::copy_layer(split).forward({torch::ones({2})})[0], torch::ones({2})));
  expect_error([] { graph::make_layer("res", Residual(4), {"a"}, {"b"}); },
               {"layer 'res': its module's forward takes 2 tensors, but the layer names 1 input"});
  expect_error([] { graph::make_layer("split", Split(), {"a"}, {"b"}); },
               {"layer 'split': its module's forward returns 2 tensors, but the layer names 1 "
                "output"});
}

TEST(CustomModel, CatalogRefusesWhatDoesNotFit) {
  register_own();
  train::Config c = config();
  c.data = "spheres";
  expect_error([&] { train::Trainer t(c); },
               {"model test-own takes no volumes, but Config::data = spheres gives volumes: use "
                "Config::data = fashion-mnist, mnist or test-blobs, or Config::model = unet3d"});
  c.data = "test-blobs";
  c.spatial = 2;
  expect_error([&] { own(c); }, {"Config::spatial = 2 cuts every sample's volume into slabs, but "
                                 "model test-own has no volume: use Config::model = conv3d-stack "
                                 "or unet3d"});
  c.spatial = 1;
  c.data = "test-blobs:somewhere";
  expect_error([&] { train::Trainer t(c); },
               {"test-blobs is a data set of its own and takes no folder"});
  train::ModelKind empty;
  empty.name = "mlp";
  expect_error([&] { train::register_model(empty); }, {"register_model: model 'mlp' needs both"});
  train::ModelKind again;
  again.name = "test-own";
  again.needs = [](const train::Config&) { return train::ModelNeeds{}; };
  again.make = [](const train::Config&, const std::vector<int64_t>&) { return own_model(); };
  expect_error([&] { train::register_model(again); }, {"a model named 'test-own' exists already"});
  c.model = "nonet";
  c.data = "test-blobs";
  expect_error([&] { train::Trainer t(c); },
               {"unknown model 'nonet'; use conv3d-stack, mlp, unet3d, a path to an .onnx file "
                "or test-own"});
}

}  // namespace
}  // namespace tandem
