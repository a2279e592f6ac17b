// A job of 2 ranks that trains one step of the small MLP (one stage per rank, GPipe, 2
// micro-batches of 4 samples) with one fault injected into one message; faults.cmake runs it
// and checks from outside that the job ends on every rank with a non-zero status and the
// failing rank's prefixed report. Usage: test_mpi_faults FAULT COMM_TIMEOUT_S
//
// Each rank wraps its MPI transport in the same FaultyTransport: the fault fires on the rank
// that sends the message it matches. The rank that notices the failure aborts the transport,
// which prints its report with the rank prefix and ends the job (MPI_Abort), as under
// `tandem train`; "step done" is printed only by a rank whose step completed.
#include <cstdio>
#include <string>

#include "../runtime/test_models.h"
#include "mpi/environment.h"
#include "mpi/mpi_transport.h"
#include "tandem/runtime/pipeline.h"
#include "tandem/transport/faulty.h"

int main(int argc, char** argv) {
  using namespace tandem;
  mpi::Environment env(&argc, &argv);
  if (argc != 3 || env.size() != 2) {
    std::fprintf(stderr, "%s usage: mpirun -n 2 test_mpi_faults FAULT COMM_TIMEOUT_S\n",
                 env.prefix().c_str());
    return 2;
  }
  mpi::MpiTransportOptions mpi_options;
  mpi_options.comm_timeout_s = std::stod(argv[2]);
  auto wire = std::make_shared<mpi::MpiTransport>(env, mpi::Layout{2, 1}, mpi_options);
  {
    runtime::PipelineOptions o;
    o.devices = parse_devices("2", 1);
    o.schedule = "gpipe";
    o.microbatches = 2;
    o.transport = wire;
    o.wrap_transport = [&](std::shared_ptr<transport::Transport> t) {
      return std::make_shared<transport::FaultyTransport>(
          t, std::vector<transport::Fault>{transport::parse_fault(argv[1])});
    };
    graph::Model m = testing::small_mlp();
    auto part = graph::partition_by_balance(m, {3, 3});
    runtime::Pipeline p(std::move(m), part, o);
    auto gen = torch::make_generator<at::CPUGeneratorImpl>(5);
    torch::Tensor x = torch::randn({8, 12}, gen);
    torch::Tensor y = torch::randint(5, {8}, gen);
    p.forward_backward(p.needs_input() ? x : torch::Tensor(),
                       p.needs_target() ? y : torch::Tensor(), 8);
    std::fprintf(stderr, "%s step done\n", env.prefix().c_str());
  }
  return 0;
}
