// onnx_train_driver: trains an ONNX model K steps on given batches and writes tandem's
// consolidated state dict, for torch_models.check_training to compare with PyTorch.
//
//   onnx_train_driver MODEL.onnx BATCHES.pt OUT.pt LOSS DEVICES MICROBATCHES LR
//
// BATCHES.pt holds "input/<k>" and "target/<k>" for steps k = 0, 1, ...; each step runs
// forward and backward of the whole batch on DEVICES in-process devices (1F1B, MICROBATCHES
// micro-batches, uneven where they do not divide the batch), then SGD(LR). Launched by mpirun
// with N > 1 ranks it trains on N ranks instead (one stage each, the MPI transport). The
// weights are saved as a checkpoint (sharded per stage) and consolidated, as `tandem train
// --save-dir` and `tandem consolidate` do.
#include <torch/torch.h>

#include <cstdio>
#include <filesystem>
#include <iostream>

#include "checkpoint/optimizer_state.h"
#include "common/launcher.h"
#include "tandem/checkpoint/all.h"
#include "tandem/onnx/load.h"
#include "tandem/runtime/pipeline.h"
#if TANDEM_WITH_MPI
#include "mpi/mpi_transport.h"
#endif

namespace tandem {
namespace {

int train(int argc, char** argv) {
  if (argc != 8) {
    std::fprintf(stderr, "usage: %s MODEL.onnx BATCHES.pt OUT.pt LOSS DEVICES MICROBATCHES LR\n",
                 argv[0]);
    return 2;
  }
  const std::string model_path = argv[1], batches_path = argv[2], out = argv[3];
  onnx::LoadOptions lo;
  lo.loss = argv[4];
  // The MPI environment outlives everything that holds the transport (the options, the
  // pipeline): the transport's progress thread must stop before MPI is finalized.
#if TANDEM_WITH_MPI
  std::unique_ptr<mpi::Environment> env;
  std::shared_ptr<mpi::MpiTransport> transport;
#endif
  const int devices = std::stoi(argv[5]);
  runtime::PipelineOptions o;
  o.schedule = "1f1b";
  o.microbatches = std::stoi(argv[6]);
  const double lr = std::stod(argv[7]);
  checkpoint::World world;
#if TANDEM_WITH_MPI
  if (launched_world_size() > 1) {
    env = std::make_unique<mpi::Environment>(&argc, &argv);
    transport = std::make_shared<mpi::MpiTransport>(*env, mpi::Layout{env->size(), 1},
                                                    mpi::MpiTransportOptions{60.0});
    o.transport = transport;
    world = {env->rank(), env->size(), 0, 1, [t = transport.get()] { t->barrier(); }};
  }
#endif
  const int stages = world.ranks > 1 ? world.ranks : devices;
  o.devices = parse_devices(std::to_string(stages), 1);
  graph::Model model = onnx::load(model_path, lo);
  const graph::Partition partition = graph::partition_by_parameters(model, stages);
  runtime::Pipeline p(std::move(model), partition, o);
  p.set_optimizer([lr](std::vector<torch::Tensor> params) {
    return std::make_unique<torch::optim::SGD>(params, torch::optim::SGDOptions(lr));
  });
  const auto batches = checkpoint::load_state_dict_file(batches_path);
  int64_t steps = 0;
  while (batches.count(fmt::format("input/{}", steps))) {
    p.forward_backward(batches.at(fmt::format("input/{}", steps)),
                       batches.at(fmt::format("target/{}", steps)));
    p.optimizer_step();
    ++steps;
  }
  const std::string dir = out + ".ckpt";
  if (world.rank == 0) std::filesystem::remove_all(dir);
  if (world.barrier) world.barrier();
  checkpoint::SaveOptions so;
  so.world = world;
  checkpoint::save(p, {steps, 0, 0, 0}, dir, so);
  if (world.rank == 0) {
    const int64_t n = checkpoint::consolidate(dir, out);
    std::cout << "steps=" << steps << " stages=" << stages << " tensors=" << n << "\n";
  }
  return 0;
}

}  // namespace
}  // namespace tandem

int main(int argc, char** argv) {
  try {
    return tandem::train(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "onnx_train_driver: %s\n", e.what());
    return 1;
  }
}
