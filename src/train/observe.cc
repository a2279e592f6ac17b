#include "tandem/train/observe.h"

#include <algorithm>
#include <map>

#include "schedule/index.h"
#include "schedule/lower.h"
#include "schedule/replay.h"
#include "tandem/common/check.h"
#include "tandem/schedule/all.h"

namespace tandem::train {

namespace {

// One id per message: direction, endpoints, micro-batch, step, with a spatial split the slab
// (slab j of one stage sends to slab j of the next), and with replicas the replica (each sends
// within its own).
long long flow_id(int64_t step, bool gradient, int from, int to, int mb, int stages, int mbs,
                  int slab, int slabs, int replica, int replicas) {
  return ((((((step * 2 + gradient) * stages + from) * stages + to) * mbs) + mb) * slabs + slab) *
             replicas +
         replica;
}

}  // namespace

void add_step_spans(trace::Trace& out, const runtime::Pipeline& p,
                    const std::vector<runtime::ActionTiming>& timings, int64_t step,
                    double offset_us, int rank, int replicas) {
  TANDEM_CHECK(replicas >= 1 && p.replica() < replicas,
               "the trace's spans of replica {} need at least {} replicas, not {}", p.replica(),
               p.replica() + 1, replicas);
  const int stages = p.partition().num_stages;
  const int mbs = p.schedule().num_microbatches;
  const int slabs = p.slabs();
  for (const auto& t : timings) {
    const int slab = t.device % slabs;
    trace::Span s;
    s.device = rank >= 0 ? rank : t.device;
    s.device_name = rank >= 0 ? fmt::format("r{} {}", rank, p.devices()[t.device].name)
                              : p.devices()[t.device].name;
    s.name = schedule::to_string(t.action);
    s.stage = t.action.stage;
    s.microbatch = t.action.microbatch;
    s.layers = p.partition().layer_range(p.model(), t.action.stage);
    s.start_us = offset_us + t.start_us;
    s.dur_us = t.end_us - t.start_us;
    const bool gradient = t.action.op != schedule::Op::kForward;
    switch (t.action.kind) {
      case schedule::Kind::kCompute:
        s.track = "compute";
        s.kind = static_cast<char>(t.action.op);
        break;
      case schedule::Kind::kSend:
        s.track = "comm";
        s.kind = 'S';
        s.flow_out = flow_id(step, gradient, t.action.stage, t.action.peer, t.action.microbatch,
                             stages, mbs, slab, slabs, p.replica(), replicas);
        break;
      case schedule::Kind::kRecv:
        s.track = "comm";
        s.kind = 'R';
        s.flow_in = flow_id(step, gradient, t.action.peer, t.action.stage, t.action.microbatch,
                            stages, mbs, slab, slabs, p.replica(), replicas);
        break;
    }
    out.spans.push_back(std::move(s));
  }
}

void add_exchange_spans(trace::Trace& out, const runtime::Pipeline& p,
                        const std::vector<std::vector<spatial::Exchange>>& exchanges,
                        double offset_us, int rank) {
  for (size_t d = 0; d < exchanges.size(); ++d) {
    for (const spatial::Exchange& e : exchanges[d]) {
      trace::Span s;
      s.device = rank >= 0 ? rank : static_cast<int>(d);
      s.device_name =
          rank >= 0 ? fmt::format("r{} {}", rank, p.devices()[d].name) : p.devices()[d].name;
      s.track = "slabs";
      s.kind = 'X';
      s.name = fmt::format("{} {}", e.kind, e.microbatch);
      s.stage = e.stage;
      s.microbatch = e.microbatch;
      s.start_us = offset_us + e.start_us;
      s.dur_us = e.end_us - e.start_us;
      out.spans.push_back(std::move(s));
    }
  }
}

void add_phase_spans(trace::Trace& out, const runtime::Pipeline& p,
                     const std::vector<runtime::PhaseTiming>& phases, double offset_us, int rank) {
  for (const runtime::PhaseTiming& t : phases) {
    trace::Span s;
    s.device = rank >= 0 ? rank : t.device;
    s.device_name = rank >= 0 ? fmt::format("r{} {}", rank, p.devices()[t.device].name)
                              : p.devices()[t.device].name;
    s.kind = t.kind;
    s.track = t.kind == 'O' ? "optimizer" : "comm";
    s.name = t.kind == 'O' ? "optimizer" : "gradient sums";
    s.start_us = offset_us + t.start_us;
    s.dur_us = t.end_us - t.start_us;
    out.spans.push_back(std::move(s));
  }
}

trace::Trace simulated_trace(const schedule::Schedule& sched, const schedule::Timeline& timeline,
                             double unit_us) {
  trace::Trace out;
  out.metadata["source"] = "simulator";
  out.metadata["schedule"] = sched.name;
  for (const auto& ta : timeline.actions) {
    if (ta.action.kind != schedule::Kind::kCompute) continue;
    trace::Span s;
    s.device = ta.device;
    s.device_name = fmt::format("device {}", ta.device);
    s.track = "compute";
    s.name = schedule::to_string(ta.action);
    s.kind = static_cast<char>(ta.action.op);
    s.stage = ta.action.stage;
    s.microbatch = ta.action.microbatch;
    s.start_us = ta.start * unit_us;
    s.dur_us = (ta.end - ta.start) * unit_us;
    out.spans.push_back(std::move(s));
  }
  return out;
}

StepReport analyze_step(const runtime::Pipeline& p,
                        const std::vector<runtime::ActionTiming>& timings, int64_t batch,
                        const std::vector<std::vector<spatial::Exchange>>& exchanges) {
  StepReport r;
  const int devices = static_cast<int>(p.devices().size());
  const int stages = p.partition().num_stages;
  r.busy.assign(devices, 0);
  r.comm.assign(devices, 0);
  if (timings.empty()) return r;
  double begin = timings.front().start_us, end = timings.front().end_us;
  // Mean measured time of each compute op per stage.
  std::map<std::pair<int, char>, std::pair<double, int>> per_op;
  for (const auto& t : timings) {
    begin = std::min(begin, t.start_us);
    end = std::max(end, t.end_us);
    const double d = t.end_us - t.start_us;
    if (t.action.kind == schedule::Kind::kCompute) {
      r.busy[t.device] += d;
      auto& acc = per_op[{t.action.stage, static_cast<char>(t.action.op)}];
      acc.first += d;
      acc.second += 1;
    } else {
      r.comm[t.device] += d;
    }
  }
  const double wall = end - begin;
  r.seconds = wall / 1e6;
  double busy_total = 0;
  for (int d = 0; d < devices; ++d) {
    busy_total += r.busy[d];
    r.busy[d] /= wall;
    r.comm[d] /= wall;
  }
  // Only the devices that appear in the timings (all of them in process).
  std::vector<bool> seen(devices, false);
  for (const auto& t : timings) seen[t.device] = true;
  const int present = static_cast<int>(std::count(seen.begin(), seen.end(), true));
  r.measured_bubble = 1.0 - busy_total / (present * wall);

  schedule::Costs costs;
  auto mean = [&](int s, char op) {
    auto it = per_op.find({s, op});
    return it == per_op.end() ? 0.0 : it->second.first / it->second.second;
  };
  const bool split = schedule::splits_backward(p.schedule());
  for (int s = 0; s < stages; ++s) {
    costs.forward.push_back(mean(s, 'F'));
    costs.backward.push_back(split ? mean(s, 'I') + mean(s, 'W') : mean(s, 'B'));
    if (split) {
      costs.input.push_back(mean(s, 'I'));
      costs.weight.push_back(mean(s, 'W'));
    }
  }
  schedule::StageGraph g;
  g.num_stages = stages;
  g.consumers = p.flow().consumers();
  if (present == devices) {
    r.predicted_bubble = schedule::simulate(schedule::compute_only(p.schedule()), g, costs).bubble;
  }
  for (const auto& l : p.model().layers)
    r.flops += 3.0 * l.forward_flops_per_sample * batch;  // F + 2x in B
  if (p.slabs() > 1) {
    r.exchange.assign(devices, 0);
    r.exchange_bytes.assign(devices, 0);
    for (size_t d = 0; d < exchanges.size() && d < static_cast<size_t>(devices); ++d) {
      for (const spatial::Exchange& e : exchanges[d]) {
        r.exchange[d] += (e.end_us - e.start_us) / wall;
        r.exchange_bytes[d] += e.bytes_sent;
      }
    }
  }
  return r;
}

std::vector<MemoryPeak> memory_peaks(const std::vector<DeviceSpec>& devices,
                                     const std::vector<uint64_t>& peak_bytes) {
  // Device names are unique among CPU devices (parse_devices), so one name is one memory.
  std::vector<MemoryPeak> out;
  for (size_t d = 0; d < devices.size() && d < peak_bytes.size(); ++d) {
    auto same = std::find_if(out.begin(), out.end(),
                             [&](const MemoryPeak& m) { return m.name == devices[d].name; });
    if (same == out.end()) same = out.insert(out.end(), MemoryPeak{devices[d].name, 0, {}, -1, ""});
    // A shared GPU's allocator gives each of its devices the same number: take the largest.
    same->peak_bytes = std::max(same->peak_bytes, peak_bytes[d]);
    same->devices.push_back(static_cast<int>(d));
  }
  for (MemoryPeak& m : out) m.label = m.name;
  return out;
}

std::vector<MemoryPeak> memory_peaks_of_ranks(
    const std::vector<DeviceSpec>& devices, const std::vector<std::vector<uint64_t>>& rank_peaks) {
  TANDEM_CHECK(!devices.empty(), "memory_peaks_of_ranks: the pipeline has no devices");
  std::vector<MemoryPeak> out;
  std::map<std::string, int> uses;
  for (size_t q = 0; q < rank_peaks.size(); ++q) {
    const size_t d = q % devices.size();
    const uint64_t peak = d < rank_peaks[q].size() ? rank_peaks[q][d] : 0;
    out.push_back({devices[d].name, peak, {static_cast<int>(d)}, static_cast<int>(q), ""});
    ++uses[devices[d].name];
  }
  for (MemoryPeak& m : out)
    m.label = uses[m.name] > 1 ? fmt::format("{}@r{}", m.name, m.rank) : m.name;
  return out;
}

}  // namespace tandem::train
