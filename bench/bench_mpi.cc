// Point-to-point transfer through tandem's MPI transport against a raw MPI ping-pong of the
// same sizes, in the same program: both ping-pong between ranks 0 and 1, the raw one with
// blocking MPI_Send/MPI_Recv of a byte buffer, tandem's with send()/recv() of float tensors
// (header, non-blocking operations, the progress thread, a fresh tensor per receive).
//
// Run under mpirun with 2 ranks. Rank 0 prints a Markdown table: GB/s medians over --repeats
// runs of --iters round trips each, min-max, and tandem's ratio to raw.
// Usage: mpirun -n 2 bench_mpi [--repeats N] [--iters N] [--max-mib N]
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "mpi/environment.h"
#include "mpi/mpi_transport.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Stats {
  double median, min, max;
};

Stats summarize(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return {v[v.size() / 2], v.front(), v.back()};
}

// GB/s of `iters` round trips of `bytes` through the transport between ranks 0 and 1.
double tandem_pingpong_gbps(tandem::mpi::MpiTransport& t, int rank, size_t bytes, int iters,
                            int64_t& serial) {
  const int peer = 1 - rank;
  torch::Tensor payload = torch::ones({static_cast<int64_t>(bytes / sizeof(float))});
  auto key = [&](int from) {
    return tandem::transport::MessageKey{"x", 0, static_cast<int>(serial), false, from, 1 - from};
  };
  auto round = [&] {
    if (rank == 0) {
      t.send(0, 1, key(0), payload, nullptr);
      payload = t.recv(0, 1, key(1), c10::kCPU);
    } else {
      payload = t.recv(1, 0, key(0), c10::kCPU);
      t.send(1, 0, key(1), payload, nullptr);
    }
    ++serial;
  };
  (void)peer;
  round();  // untimed
  t.barrier();
  const auto start = Clock::now();
  for (int i = 0; i < iters; ++i) round();
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return 2.0 * static_cast<double>(bytes) * iters / std::max(seconds, 1e-9) / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  int repeats = 5, iters = 20, max_mib = 64;
  for (int i = 1; i < argc; ++i) {
    const bool has_value = i + 1 < argc;
    if (!std::strcmp(argv[i], "--repeats") && has_value) {
      repeats = std::atoi(argv[++i]);
    } else if (!std::strcmp(argv[i], "--iters") && has_value) {
      iters = std::atoi(argv[++i]);
    } else if (!std::strcmp(argv[i], "--max-mib") && has_value) {
      max_mib = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: mpirun -n 2 %s [--repeats N] [--iters N] [--max-mib N]\n",
                   argv[0]);
      return 2;
    }
  }
  if (repeats < 1 || iters < 1 || max_mib < 1) {
    std::fprintf(stderr, "bench_mpi: --repeats, --iters and --max-mib must be at least 1\n");
    return 2;
  }
  tandem::mpi::Environment env(&argc, &argv);
  if (env.size() != 2) {
    if (env.rank() == 0) std::fprintf(stderr, "bench_mpi: run with 2 ranks, not %d\n", env.size());
    return 2;
  }
  at::set_num_threads(1);
  const int rank = env.rank();
  int64_t serial = 0;
  {
    tandem::mpi::MpiTransport t(env, tandem::mpi::Layout{2, 1},
                                tandem::mpi::MpiTransportOptions{60.0});
    if (rank == 0) {
      std::printf(
          "| message | raw MPI GB/s median | min-max | tandem GB/s median | min-max | tandem / raw "
          "|\n");
      std::printf("|---|---|---|---|---|---|\n");
    }
    for (size_t bytes = 64 * 1024; bytes <= static_cast<size_t>(max_mib) << 20; bytes *= 4) {
      std::vector<double> raw, ours;
      for (int r = 0; r < repeats; ++r) {
        raw.push_back(t.raw_pingpong_gbps(bytes, iters, 1 - rank));
        ours.push_back(tandem_pingpong_gbps(t, rank, bytes, iters, serial));
      }
      if (rank == 0) {
        const Stats a = summarize(raw), b = summarize(ours);
        const std::string size = bytes >= (1u << 20) ? std::to_string(bytes >> 20) + " MiB"
                                                     : std::to_string(bytes >> 10) + " KiB";
        std::printf("| %s | %.2f | %.2f-%.2f | %.2f | %.2f-%.2f | %.2f |\n", size.c_str(), a.median,
                    a.min, a.max, b.median, b.min, b.max, b.median / a.median);
        std::fflush(stdout);
      }
    }
    t.barrier();
  }
  return 0;
}
