#include "mpi/collectives.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <map>
#include <set>

#include "mpi/handles.h"
#include "mpi/wire.h"
#include "tandem/common/check.h"

namespace tandem::mpi {

namespace {

constexpr int kClockTag = 7101;
constexpr int kPingTag = 7102;

int comm_rank(MPI_Comm comm) {
  int r = 0;
  check_mpi(MPI_Comm_rank(comm, &r), "MPI_Comm_rank");
  return r;
}

int comm_size(MPI_Comm comm) {
  int s = 0;
  check_mpi(MPI_Comm_size(comm, &s), "MPI_Comm_size");
  return s;
}

double now_us() {
  using namespace std::chrono;
  return duration<double, std::micro>(steady_clock::now().time_since_epoch()).count();
}

// Displacements for Gatherv/Allgatherv; the total must fit MPI's int counts.
std::vector<int> displacements(const std::vector<int>& lengths) {
  std::vector<int> displ(lengths.size(), 0);
  int64_t total = 0;
  for (size_t i = 0; i < lengths.size(); ++i) {
    displ[i] = static_cast<int>(total);
    total += lengths[i];
  }
  TANDEM_CHECK(total <= std::numeric_limits<int>::max(),
               "gathering {} bytes of text is more than MPI's 2 GiB limit", total);
  return displ;
}

std::vector<std::string> split(const std::string& joined, const std::vector<int>& lengths,
                               const std::vector<int>& displ) {
  std::vector<std::string> out;
  out.reserve(lengths.size());
  for (size_t i = 0; i < lengths.size(); ++i) out.push_back(joined.substr(displ[i], lengths[i]));
  return out;
}

// At least one message, so a 0-byte ping-pong measures latency.
int64_t message_count(size_t n) { return std::max<int64_t>(1, chunk_count(n)); }

void send_bytes(MPI_Comm comm, char* data, size_t n, int peer) {
  for (int64_t i = 0; i < message_count(n); ++i) {
    check_mpi(
        MPI_Send(data + i * kMaxChunkBytes, chunk_bytes(n, i), MPI_BYTE, peer, kPingTag, comm),
        "MPI_Send");
  }
}

void recv_bytes(MPI_Comm comm, char* data, size_t n, int peer) {
  for (int64_t i = 0; i < message_count(n); ++i) {
    check_mpi(MPI_Recv(data + i * kMaxChunkBytes, chunk_bytes(n, i), MPI_BYTE, peer, kPingTag, comm,
                       MPI_STATUS_IGNORE),
              "MPI_Recv");
  }
}

}  // namespace

void barrier_idle(MPI_Comm comm) {
  Request r;
  check_mpi(MPI_Ibarrier(comm, r.ptr()), "MPI_Ibarrier");
  r.wait_idle();
}

void agree_on(MPI_Comm comm, uint64_t config_hash, const std::string& description) {
  uint64_t lo = 0, hi = 0;
  {
    Request r;
    check_mpi(MPI_Iallreduce(&config_hash, &lo, 1, MPI_UINT64_T, MPI_MIN, comm, r.ptr()),
              "MPI_Iallreduce");
    r.wait_idle();
    check_mpi(MPI_Iallreduce(&config_hash, &hi, 1, MPI_UINT64_T, MPI_MAX, comm, r.ptr()),
              "MPI_Iallreduce");
    r.wait_idle();
  }
  if (lo == hi) return;

  std::vector<uint64_t> hashes(comm_size(comm));
  check_mpi(MPI_Allgather(&config_hash, 1, MPI_UINT64_T, hashes.data(), 1, MPI_UINT64_T, comm),
            "MPI_Allgather");
  std::vector<std::string> descriptions = all_gather_strings(comm, description);
  // One clause per distinct configuration, in the order of the first rank that has it.
  std::map<uint64_t, std::vector<int>> ranks_of;
  std::vector<uint64_t> order;
  for (int r = 0; r < static_cast<int>(hashes.size()); ++r) {
    auto& ranks = ranks_of[hashes[r]];
    if (ranks.empty()) order.push_back(hashes[r]);
    ranks.push_back(r);
  }
  // Name only the settings ("key=value" words) that differ between the configurations.
  auto words = [](const std::string& text) {
    std::map<std::string, std::string> out;  // key -> word
    for (size_t at = 0; at < text.size();) {
      const size_t end = std::min(text.find(' ', at), text.size());
      const std::string word = text.substr(at, end - at);
      if (!word.empty()) out[word.substr(0, word.find('='))] = word;
      at = end + 1;
    }
    return out;
  };
  std::vector<std::map<std::string, std::string>> configs;
  for (uint64_t h : order) configs.push_back(words(descriptions[ranks_of[h].front()]));
  std::set<std::string> differing;
  for (const auto& config : configs) {
    for (const auto& [key, word] : config) {
      for (const auto& other : configs) {
        auto it = other.find(key);
        if (it == other.end() || it->second != word) differing.insert(key);
      }
    }
  }
  std::string clauses;
  for (size_t i = 0; i < order.size(); ++i) {
    const auto& ranks = ranks_of[order[i]];
    std::vector<std::string> shown;
    for (const auto& key : differing) {
      auto it = configs[i].find(key);
      shown.push_back(it == configs[i].end() ? "no " + key : it->second);
    }
    if (!clauses.empty()) clauses += "; ";
    clauses += fmt::format("{} {} {} {}", ranks.size() == 1 ? "rank" : "ranks",
                           fmt::join(ranks, ", "), ranks.size() == 1 ? "has" : "have",
                           shown.empty() ? std::string("other input files")
                                         : fmt::format("{}", fmt::join(shown, " ")));
  }
  TANDEM_CHECK(false,
               "ranks disagree on the configuration: {} (rank {}'s whole configuration: '{}'). "
               "Start every rank with the same options and input files",
               clauses, ranks_of[order.front()].front(),
               descriptions[ranks_of[order.front()].front()]);
}

double clock_offset_us(MPI_Comm comm, int rounds) {
  TANDEM_CHECK(rounds >= 1, "clock alignment needs at least 1 round, got {}", rounds);
  const int rank = comm_rank(comm), size = comm_size(comm);
  barrier_idle(comm);
  double offset = 0.0;
  if (rank == 0) {
    // Serve each rank in turn: answer every request with rank 0's clock.
    for (int peer = 1; peer < size; ++peer) {
      for (int k = 0; k < rounds; ++k) {
        char ping = 0;
        check_mpi(MPI_Recv(&ping, 1, MPI_CHAR, peer, kClockTag, comm, MPI_STATUS_IGNORE),
                  "MPI_Recv");
        double t0 = now_us();
        check_mpi(MPI_Send(&t0, 1, MPI_DOUBLE, peer, kClockTag, comm), "MPI_Send");
      }
    }
  } else {
    double best_rtt = std::numeric_limits<double>::infinity();
    for (int k = 0; k < rounds; ++k) {
      char ping = 0;
      double t0 = 0.0;
      double t1 = now_us();
      check_mpi(MPI_Send(&ping, 1, MPI_CHAR, 0, kClockTag, comm), "MPI_Send");
      check_mpi(MPI_Recv(&t0, 1, MPI_DOUBLE, 0, kClockTag, comm, MPI_STATUS_IGNORE), "MPI_Recv");
      double t2 = now_us();
      if (t2 - t1 < best_rtt) {
        best_rtt = t2 - t1;
        offset = t0 - (t1 + t2) / 2.0;
      }
    }
  }
  return offset;
}

std::vector<std::string> gather_strings(MPI_Comm comm, const std::string& text) {
  const int rank = comm_rank(comm), size = comm_size(comm);
  TANDEM_CHECK(text.size() <= static_cast<size_t>(std::numeric_limits<int>::max()),
               "a text of {} bytes is too long to gather", text.size());
  int length = static_cast<int>(text.size());
  std::vector<int> lengths(rank == 0 ? size : 0);
  Request r;
  check_mpi(MPI_Igather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, 0, comm, r.ptr()),
            "MPI_Igather");
  r.wait_idle();
  std::vector<int> displ = rank == 0 ? displacements(lengths) : std::vector<int>{};
  std::string joined(rank == 0 && size > 0 ? displ.back() + lengths.back() : 0, '\0');
  check_mpi(MPI_Igatherv(text.data(), length, MPI_CHAR, joined.data(), lengths.data(), displ.data(),
                         MPI_CHAR, 0, comm, r.ptr()),
            "MPI_Igatherv");
  r.wait_idle();
  if (rank != 0) return {};
  return split(joined, lengths, displ);
}

std::vector<std::string> all_gather_strings(MPI_Comm comm, const std::string& text) {
  const int size = comm_size(comm);
  TANDEM_CHECK(text.size() <= static_cast<size_t>(std::numeric_limits<int>::max()),
               "a text of {} bytes is too long to gather", text.size());
  int length = static_cast<int>(text.size());
  std::vector<int> lengths(size);
  Request r;
  check_mpi(MPI_Iallgather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, comm, r.ptr()),
            "MPI_Iallgather");
  r.wait_idle();
  std::vector<int> displ = displacements(lengths);
  std::string joined(displ.back() + lengths.back(), '\0');
  check_mpi(MPI_Iallgatherv(text.data(), length, MPI_CHAR, joined.data(), lengths.data(),
                            displ.data(), MPI_CHAR, comm, r.ptr()),
            "MPI_Iallgatherv");
  r.wait_idle();
  return split(joined, lengths, displ);
}

double raw_pingpong_gbps(MPI_Comm comm, size_t bytes, int iters, int peer) {
  const int rank = comm_rank(comm), size = comm_size(comm);
  TANDEM_CHECK(peer >= 0 && peer < size && peer != rank,
               "raw ping-pong on rank {} needs another rank of 0..{} as its peer, got {}", rank,
               size - 1, peer);
  TANDEM_CHECK(iters >= 1, "raw ping-pong needs at least 1 iteration, got {}", iters);
  std::vector<char> buffer(bytes, 1);
  const bool leads = rank < peer;
  auto round = [&] {
    if (leads) {
      send_bytes(comm, buffer.data(), bytes, peer);
      recv_bytes(comm, buffer.data(), bytes, peer);
    } else {
      recv_bytes(comm, buffer.data(), bytes, peer);
      send_bytes(comm, buffer.data(), bytes, peer);
    }
  };
  round();  // untimed: connection setup and first-touch of the buffer
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) round();
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return 2.0 * static_cast<double>(bytes) * iters / std::max(seconds, 1e-9) / 1e9;
}

}  // namespace tandem::mpi
