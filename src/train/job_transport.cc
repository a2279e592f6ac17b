// The planner's transport costs between the ranks of an MPI job (planner.h:
// measured_job_transport), measured through the job's own transport as a run's messages and
// gradient sums go.
#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <nlohmann/json.hpp>

#include "tandem/common/check.h"
#include "tandem/common/device.h"
#include "tandem/train/job.h"
#include "tandem/train/planner.h"

namespace tandem::train {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

// Sizes of the measured messages and sums, in floats: 64 KiB to 8 MiB for messages (a 64³
// volume's activation of 8 channels for one sample), to 16 MiB for sums (a width-1024 layer's
// weight gradients).
const std::vector<int64_t> kMessageFloats{1 << 14, 1 << 16, 1 << 18, 1 << 20, 1 << 21};
const std::vector<int64_t> kSumFloats{1 << 14, 1 << 16, 1 << 18, 1 << 20, 1 << 21, 1 << 22};

// Keys no run uses, one per measurement and round.
transport::MessageKey probe_key(const std::string& what, int measurement, int round) {
  return {"planner " + what, measurement, round, false, 0, 0, -1};
}

// Seconds an exchange among k ranks adds to a rank's work while every rank works, as ranks do
// in a run: each slab group's ranks exchange halos between their layers' work, every group at
// once. With more ranks than cores an exchange then also waits until the system runs the
// partner, whose turn on a core the other ranks' work takes: a unet's exchanges in a run of 4
// ranks on 2 cores took 0.9 ms at the median and 1.5 ms in the mean, where ranks 0 and 1
// exchanging while the others waited took 0.25 ms.
// Every group of k consecutive ranks (ranks beyond the last whole group only work) runs
// 2 x `rounds` rounds of one fixed work in blocks of 10, each round of every other block
// followed by an exchange with the rank's neighbours in its group (16 bytes each way): blocks
// with exchanges and without alternate so that both meet the same moments of the machine's
// other work (as in process: plan_costs.cc). The rounds with an exchange less those without,
// per round, the mean over the exchanging ranks, and at least the mean round of the exchanges
// alone (no work); untimed: the first block of each kind and each block's first round.
// Collective.
double loaded_exchange(Job& job, int k, int measurement, int rounds) {
  constexpr int kBlock = 10;
  TANDEM_CHECK(rounds >= kBlock && rounds % kBlock == 0,
               "an exchange is timed in blocks of {} rounds, not in {} rounds", kBlock, rounds);
  const std::shared_ptr<transport::Transport> t = job.transport();
  const int me = job.rank();
  const bool exchanging = me < job.world() / k * k;
  const int first = me / k * k;  // of the rank's group
  auto in_group = [&](int r) { return r >= first && r < first + k; };
  const int threads_before = at::get_num_threads();
  at::set_num_threads(1);  // a device's threads under MPI
  const torch::Tensor a = torch::randn({128, 128});
  torch::Tensor c = torch::randn({128, 128});
  const torch::Tensor planes = torch::zeros({4});
  double with = 0, without = 0, alone = 0;
  // `work`: the alternating blocks, into `with` and `without`; else the exchanges alone, every
  // round, into `alone`.
  auto run = [&](bool work) {
    job.barrier();
    const int all = work ? 2 * rounds + 2 * kBlock : rounds + 1;
    for (int r = 0; r < all; ++r) {
      const bool exchange = !work || (r / kBlock) % 2 == 0;
      const auto start = Clock::now();
      for (int n = 0; work && n < 4; ++n) c = torch::mm(a, c.clamp(-1, 1));
      if (exchange && exchanging) {
        const transport::MessageKey key =
            probe_key(work ? "exchange" : "exchange alone", measurement, r);
        for (int to : {me - 1, me + 1})
          if (in_group(to)) t->send(me, to, key, planes, nullptr);
        for (int from : {me - 1, me + 1})
          if (in_group(from)) t->recv(me, from, key, c10::kCPU);
      }
      if (work ? r < 2 * kBlock || r % kBlock == 0 : r == 0) continue;
      (!work ? alone : exchange ? with : without) += seconds_since(start);
    }
  };
  run(true);
  run(false);
  at::set_num_threads(threads_before);
  const double timed = static_cast<double>(rounds / kBlock * (kBlock - 1));  // of each kind
  double sum = 0, own = 0;
  int ranks = 0;
  for (const std::string& one : job.all_gather(
           exchanging ? fmt::format("{:.9e} {:.9e}", (with - without) / timed, alone / rounds)
                      : std::string())) {
    if (one.empty()) continue;
    const size_t space = one.find(' ');
    sum += std::stod(one.substr(0, space));
    own += std::stod(one.substr(space + 1));
    ++ranks;
  }
  // Never less than the exchanges alone: the difference of two times of work is noisier than
  // what a small exchange adds.
  return ranks > 0 ? std::max(own, sum) / ranks : 0.0;
}

// One-way seconds of a message of `floats` floats from rank `from` to rank `from + 1`: half the
// median round trip of 9 after a warm-up, on rank `from` (0 on the others; they wait).
// Collective.
double one_way(Job& job, int from, int64_t floats, int measurement) {
  const std::shared_ptr<transport::Transport> t = job.transport();
  const int me = job.rank();
  const int to = from + 1;
  std::vector<double> trips;
  if (me == from || me == to) {
    const torch::Tensor payload = torch::ones({floats});
    for (int r = 0; r < 10; ++r) {
      const transport::MessageKey key = probe_key("link", measurement, r);
      const auto start = Clock::now();
      if (me == from) {
        t->send(me, to, key, payload, nullptr);
        t->recv(me, to, key, c10::kCPU);
        if (r > 0) trips.push_back(seconds_since(start));
      } else {
        const torch::Tensor got = t->recv(me, from, key, c10::kCPU);
        t->send(me, from, key, got, nullptr);
      }
    }
  }
  job.barrier();
  return median_of(trips) / 2;
}

// Seconds the slowest rank takes to sum `floats` floats over its data-parallel group with the
// job's transport as it is laid out now, every group at once: the median of 7 after a warm-up.
// Collective.
double group_sum(Job& job, int64_t floats) {
  const std::shared_ptr<transport::Transport> t = job.transport();
  const int device = t->local_devices().front();
  std::vector<double> slowest;
  for (int r = 0; r < 8; ++r) {
    std::vector<torch::Tensor> grads{torch::ones({floats})};
    job.barrier();
    const auto start = Clock::now();
    t->all_reduce_sum(device, grads);
    const double mine = seconds_since(start);
    double most = 0;
    for (const std::string& one : job.all_gather(fmt::format("{:.9e}", mine)))
      most = std::max(most, std::stod(one));
    if (r > 0) slowest.push_back(most);
  }
  return median_of(slowest);
}

nlohmann::json curve_json(const std::vector<std::pair<double, double>>& curve) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& [bytes, seconds] : curve) out.push_back({bytes, seconds});
  return out;
}

std::vector<std::pair<double, double>> curve_of(const nlohmann::json& j) {
  std::vector<std::pair<double, double>> out;
  for (const nlohmann::json& point : j)
    out.emplace_back(point.at(0).get<double>(), point.at(1).get<double>());
  return out;
}

}  // namespace

std::string transport_costs_json(const TransportCosts& t) {
  nlohmann::json j;
  j["where"] = t.where;
  j["latency"] = nlohmann::json::object();
  for (const auto& [k, seconds] : t.latency) j["latency"][std::to_string(k)] = seconds;
  j["copy"] = curve_json(t.copy);
  j["all_reduce"] = nlohmann::json::object();
  for (const auto& [spatial, curve] : t.all_reduce)
    j["all_reduce"][std::to_string(spatial)] = curve_json(curve);
  return j.dump();
}

TransportCosts transport_costs_from_json(const std::string& text) {
  TransportCosts t;
  try {
    const nlohmann::json j = nlohmann::json::parse(text);
    t.where = j.at("where").get<std::string>();
    for (const auto& [k, seconds] : j.at("latency").items())
      t.latency[std::stoi(k)] = seconds.get<double>();
    t.copy = curve_of(j.at("copy"));
    for (const auto& [spatial, curve] : j.at("all_reduce").items())
      t.all_reduce[std::stoi(spatial)] = curve_of(curve);
  } catch (const nlohmann::json::exception& e) {
    TANDEM_CHECK(false, "transport costs: not their JSON form ({})", e.what());
  }
  return t;
}

int job_cores(Job& job, int replicas) {
  if (!job.mpi()) return available_cores();
  std::map<std::string, int> hosts;
  for (const std::string& one :
       job.all_gather(fmt::format("{} {}", available_cores(), job.host()))) {
    const size_t space = one.find(' ');
    int& cores = hosts[one.substr(space + 1)];
    cores = std::max(cores, std::stoi(one.substr(0, space)));
  }
  int total = 0;
  for (const auto& [host, cores] : hosts) total += cores;
  return std::max(1, total / std::max(1, replicas));
}

TransportCosts measured_job_transport(Job& job, const Config& config, const std::set<int>& k) {
  TANDEM_CHECK(job.mpi(), "measured_job_transport measures between the ranks of an MPI job");
  const int world = job.world();
  TransportCosts costs;
  costs.where = fmt::format("between {} ranks over MPI", world);
  int measurement = 0;
  std::set<int> sizes = k;
  sizes.insert(2);
  for (int members : sizes) {
    if (members < 2 || members > world) continue;
    std::vector<double> rounds;
    for (int r = 0; r < 3; ++r) rounds.push_back(loaded_exchange(job, members, ++measurement, 50));
    costs.latency[members] = median_of(rounds);
  }
  // Every link between neighbouring ranks: the slowest pair at each size (rank r measures r to
  // r + 1; every rank learns them all).
  std::vector<int64_t> floats{4};
  floats.insert(floats.end(), kMessageFloats.begin(), kMessageFloats.end());
  std::vector<double> slowest(floats.size(), 0.0);
  for (int from = 0; from + 1 < world; ++from) {
    std::vector<double> mine;
    for (int64_t n : floats) mine.push_back(one_way(job, from, n, ++measurement));
    const std::vector<std::string> all =
        job.all_gather(job.rank() == from ? nlohmann::json(mine).dump() : std::string("[]"));
    const std::vector<double> pair = nlohmann::json::parse(all[static_cast<size_t>(from)]);
    for (size_t i = 0; i < floats.size(); ++i) slowest[i] = std::max(slowest[i], pair[i]);
  }
  costs.latency[2] = std::max(costs.latency[2], slowest[0]);
  costs.copy.emplace_back(0.0, 0.0);
  for (size_t i = 1; i < floats.size(); ++i)
    costs.copy.emplace_back(floats[i] * 4.0, std::max(costs.copy.back().second,
                                                      std::max(0.0, slowest[i] - slowest[0])));
  // The gradients' sums, in each layout whose groups cross ranks.
  bool relaid = false;
  Config layout = config;
  layout.stages = 0;  // one replica's ranks as stage devices, whatever --stages says
  for (int spatial : k) {
    if (config.replicas * spatial < 2) continue;
    layout.spatial = spatial;
    job.relayout(layout);
    relaid = true;
    std::vector<std::pair<double, double>> curve{{0.0, 0.0}};
    for (int64_t n : kSumFloats) curve.emplace_back(n * 4.0, group_sum(job, n));
    // A sum of fewer bytes takes no longer than one of more: a size measured slower than a
    // larger one (ranks that share cores wait for each other's time slices) takes the larger's.
    for (size_t i = curve.size() - 1; i-- > 1;)
      curve[i].second = std::min(curve[i].second, curve[i + 1].second);
    costs.all_reduce[spatial] = curve;
  }
  if (relaid) {
    layout.spatial = config.spatial;
    job.relayout(layout);
  }
  return transport_costs_from_json(job.once([&] { return transport_costs_json(costs); }));
}

}  // namespace tandem::train
