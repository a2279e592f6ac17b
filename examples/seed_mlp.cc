// An MNIST classifier of one's own trained in 4 pipeline stages, one per MPI rank:
//
//   mpirun -n 4 ./seed_mlp [MNIST folder] [steps]     (default data/mnist, one epoch)
//   ./seed_mlp [MNIST folder] [steps]                 the same 4 stages on 4 in-process devices
//   mpirun -n 8 ./seed_mlp [MNIST folder] [steps] 2   2 data-parallel replicas of the 4 stages
//   ./seed_mlp [MNIST folder] [steps] [replicas] registered
//                                                     the model registered in tandem's catalog
//                                                     and chosen by name: the same bits
//
// Flatten -> Dense 128 relu -> a block of two Dense 128 relu -> Dropout 0.2 -> Dense 10 softmax
// (the softmax inside the cross-entropy), Adam at 1e-3, batch 64 in 8 micro-batches, 1F1B. Both
// ways print the same loss and accuracy, to the bit.
#include <tandem/common/cpu_kernels.h>
#include <tandem/common/device.h>
#include <tandem/models/layers.h>
#include <tandem/train/catalog.h>
#include <tandem/train/job.h>
#include <torch/nn/functional/loss.h>

#include <cstdio>
#include <iostream>
#include <string>

using namespace tandem;

graph::Model seed_mlp(int64_t inputs) {
  graph::Model m;
  m.name = "seed-mlp";
  m.layers.push_back(models::flatten_layer("flatten", "input", "x"));
  m.layers.push_back(models::linear_layer("dense", inputs, 128, true, "x", "h0"));
  m.layers.push_back(models::linear_layer("block.dense0", 128, 128, true, "h0", "h1"));
  m.layers.push_back(models::linear_layer("block.dense1", 128, 128, true, "h1", "h2"));
  // Keyed dropout: each sample's mask is the same under any split of the model or the batch.
  m.layers.push_back(models::dropout_layer("dropout", 0.2, "h2", "h3"));
  m.layers.push_back(models::linear_layer("logits", 128, 10, false, "h3", "output"));
  m.loss = [](const torch::Tensor& logits, const torch::Tensor& labels) {
    return torch::nn::functional::cross_entropy(logits, labels);
  };
  m.metric = [](const torch::Tensor& logits, const torch::Tensor& labels) {
    return logits.argmax(1).eq(labels).sum().item<double>();  // correct predictions
  };
  m.metric_name = "accuracy";
  return m;
}

int main(int argc, char** argv) {
  // The same bits on every x86-64 machine: tandem's portable CPU kernels (before any tensor).
  use_portable_cpu_kernels();
  // Freed tensors' memory kept for the next ones, as the tandem program keeps it.
  keep_freed_memory();
  const std::string mnist = argc > 1 ? argv[1] : "data/mnist";
  train::Config c;
  c.model = "seed-mlp";  // names the model in messages
  c.data = "mnist";      // names the data in checkpoints
  c.stages = 4;
  c.devices = "4";  // in process; under mpirun, one device per rank
  c.batch = 64;
  c.microbatches = 8;
  c.schedule = "1f1b";
  c.optimizer = train::OptimizerKind::kAdam;
  c.lr = 1e-3;
  c.lr_schedule = train::LrSchedule::kConstant;
  c.steps = argc > 2 ? std::stoll(argv[2]) : 0;    // 0: one epoch
  c.replicas = argc > 3 ? std::stoi(argv[3]) : 1;  // batch 64 each
  c.seed = 0;
  const bool registered = argc > 4 && std::string(argv[4]) == "registered";
  if (registered) {
    // The same model as an entry of the catalog: the trainer seeds torch and builds it.
    train::ModelKind k;
    k.name = "seed-mlp";
    k.summary = "the MNIST MLP of examples/seed_mlp.cc";
    k.needs = [](const train::Config&) { return train::ModelNeeds{}; };  // images, labels
    k.make = [](const train::Config&, const std::vector<int64_t>& sample) {
      int64_t inputs = 1;
      for (int64_t d : sample) inputs *= d;
      return seed_mlp(inputs);
    };
    train::register_model(k);
    c.data_dir = mnist;
  }
  train::Job job(c);  // MPI when started by mpirun with more than one rank
  job.agree(c);
  return job.guard([&] {
    std::unique_ptr<train::Trainer> trainer;
    if (registered) {
      trainer = job.trainer(c);  // the catalog's "seed-mlp" on --data mnist
    } else {
      std::unique_ptr<train::Source> source = train::make_image_source("mnist", mnist, c.seed);
      int64_t inputs = 1;
      for (int64_t d : source->input_shape()) inputs *= d;
      torch::manual_seed(c.seed);  // the parameters are the seed's
      trainer = job.trainer(c, seed_mlp(inputs), std::move(source));
    }
    const train::Result r = trainer->run();
    // The process of the last stage holds the loss (of the whole batch, every replica's).
    if (trainer->pipeline().owns_loss() && trainer->replica() == 0)
      std::printf("%sseed_mlp: steps=%lld loss=%.17g test_accuracy=%.4f\n", job.prefix().c_str(),
                  static_cast<long long>(r.steps), r.loss, r.test_metric);
  });
}
