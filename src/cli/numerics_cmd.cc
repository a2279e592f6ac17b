// tandem numerics: what this machine's CPU arithmetic depends on, and checksums of a few
// products, reductions and convolutions computed with it. Two machines whose lines match
// compute these kernels alike; where a line differs, it says what differs.
#include <ATen/Parallel.h>
#include <fmt/format.h>
#include <torch/torch.h>

#include <iostream>

#include "commands.h"
#include "session.h"
#include "tandem/common/cpu_kernels.h"
#include "tandem/common/device.h"
#include "trace/crc32c.h"

namespace tandem::cli {

namespace {
struct NumericsArgs {
  std::string cpu_kernels = "portable";
  int threads = 1;
};

// Values spread over [-0.5, 0.5) from the golden ratio's fractions, computed in double and
// rounded once: the same bits on every machine, unlike a random generator's vectorized paths.
torch::Tensor spread(std::vector<int64_t> shape, double offset) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return torch::arange(n, torch::kDouble)
      .mul(0.6180339887498949)
      .add(offset)
      .frac()
      .sub(0.5)
      .to(torch::kFloat)
      .reshape(shape);
}

uint32_t checksum(const torch::Tensor& t) {
  const torch::Tensor c = t.contiguous();
  return trace::crc32c(c.data_ptr(), c.numel() * c.element_size(), 0);
}

int run(const NumericsArgs& args) {
  use_cpu_kernels(args.cpu_kernels);  // may start this program again
  at::set_num_threads(args.threads);
  set_blas_threads(args.threads);
  for (const auto& [name, value] : cpu_numerics()) std::cout << name << ": " << value << "\n";
  // Each probe is a kind of arithmetic that rounds by the kernels that compute it.
  const torch::NoGradGuard no_grad;
  const struct {
    const char* what;
    torch::Tensor result;
  } probes[] = {
      {"matrix product 256x784 by 784x1024 (BLAS sgemm)",
       torch::mm(spread({256, 784}, 0.1), spread({784, 1024}, 0.2))},
      {"sum of 1000000 floats (ATen reduction)", spread({1000000}, 0.3).sum()},
      {"log_softmax of 256x1000 (ATen exp and log)", spread({256, 1000}, 0.4).log_softmax(1)},
      {"conv3d 1x4x16^3, 8 filters of 3^3 (oneDNN or ATen)",
       torch::conv3d(spread({1, 4, 16, 16, 16}, 0.5), spread({8, 4, 3, 3, 3}, 0.6), {}, 1, 1)},
  };
  for (const auto& p : probes)
    std::cout << fmt::format("probe: crc32c {:08x} {}\n", checksum(p.result), p.what);
  return 0;
}
}  // namespace

Runner add_numerics(CLI::App& app) {
  auto args = std::make_shared<NumericsArgs>();
  CLI::App* cmd = app.add_subcommand(
      "numerics",
      "Print what this machine's CPU arithmetic depends on (processor, LibTorch, BLAS and its "
      "kernels, ATen's kernels, threads) and checksums of a few products computed with it: where "
      "two machines give other bits for one command, the first line that differs says why.");
  cmd->add_option("--cpu-kernels", args->cpu_kernels,
                  "portable or native, as for train: the kernels the probes run with")
      ->capture_default_str()
      ->envname("TANDEM_CPU_KERNELS")
      ->check(CLI::IsMember({"portable", "native"}));
  cmd->add_option("--threads", args->threads,
                  "threads for the probes (ATen's and the BLAS's), as train's "
                  "--threads-per-device")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  return [args] { return run(*args); };
}

}  // namespace tandem::cli
