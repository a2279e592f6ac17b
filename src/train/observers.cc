#include "tandem/train/observers.h"

#include <cmath>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/output_path.h"
#include "tandem/common/cpu_kernels.h"
#include "tandem/schedule/action.h"
#include "tandem/trace/chrome_trace.h"
#include "tandem/trace/svg.h"

namespace tandem::train {

std::vector<MemoryPeak> run_memory(Job& job, const runtime::Pipeline& pipeline,
                                   const std::vector<uint64_t>& peak_bytes) {
  if (!job.mpi()) return memory_peaks(pipeline.devices(), peak_bytes);
  std::vector<std::vector<uint64_t>> rank_peaks;
  for (const std::string& text : job.all_gather(fmt::format("{}", fmt::join(peak_bytes, ",")))) {
    std::vector<uint64_t>& peaks = rank_peaks.emplace_back();
    std::stringstream in(text);
    for (std::string field; std::getline(in, field, ',');) peaks.push_back(std::stoull(field));
  }
  return memory_peaks_of_ranks(pipeline.devices(), rank_peaks);
}

void check_outputs(const ObserveOptions& o, const Trainer& trainer, const Job& job) {
  const bool loss_writer = trainer.pipeline().owns_loss() && trainer.replica() == 0;
  // Under MPI rank 0 writes the merged trace and timeline; in process the one process does.
  if (!job.mpi() || job.rank() == 0) {
    if (!o.trace.empty()) check_output_file(o.trace, "ObserveOptions::trace");
    if (!o.timeline.empty()) check_output_file(o.timeline, "ObserveOptions::timeline");
  }
  if (!job.mpi() || loss_writer) {
    if (!o.report.empty()) check_output_file(o.report, "ObserveOptions::report");
  }
  if (loss_writer && !o.tensorboard.empty())
    check_output_folder(o.tensorboard, "ObserveOptions::tensorboard");
  // Every process of replica 0 writes its stages' shards into the checkpoint folder.
  const std::string& save_dir = trainer.config().save_dir;
  if (trainer.replica() == 0 && !save_dir.empty())
    check_output_folder(save_dir, "Config::save_dir");
}

Observers::Observers(ObserveOptions options, Trainer& trainer, Job& job)
    : options_(std::move(options)), trainer_(trainer), job_(job) {
  // What decides the collectives of finish(): ranks that disagree would wait for each other.
  job_.agree(fmt::format("trace={} timeline={} report={} trace_steps={}", !options_.trace.empty(),
                         !options_.timeline.empty(), !options_.report.empty(),
                         options_.trace_steps));
  if (!options_.tensorboard.empty() && trainer_.pipeline().owns_loss() && trainer_.replica() == 0) {
    tensorboard_ = std::make_unique<trace::EventWriter>(options_.tensorboard);
  }
}

bool Observers::tracing(int64_t step) const {
  // Step 1 warms up allocators and caches; trace the next few.
  const int64_t first = trainer_.total_steps() > 1 ? 2 : 1;
  return step >= first && step < first + options_.trace_steps;
}

void Observers::after_step(int64_t step, const runtime::StepStats& stats, double samples_per_s) {
  step_seconds_.push_back(stats.seconds);
  if (stats.skipped) skipped_.push_back(step);
  const auto& p = trainer_.pipeline();
  const bool want_trace =
      !options_.trace.empty() || !options_.timeline.empty() || !options_.report.empty();
  if (want_trace && tracing(step)) {
    const double offset = stats.started_us;
    add_step_spans(trace_, p, p.last_timings(), step, offset, job_.mpi() ? job_.rank() : -1,
                   trainer_.config().replicas);
    add_exchange_spans(trace_, p, stats.exchanges, offset, job_.mpi() ? job_.rank() : -1);
    add_phase_spans(trace_, p, p.last_phases(), offset, job_.mpi() ? job_.rank() : -1);
    // One counter per memory: a GPU that devices share is drawn once, on its first device's
    // row, and its name says which devices share it. Under MPI each rank has one device, and
    // its process its own allocator: one counter on the rank's row.
    if (job_.mpi()) {
      const uint64_t peak = stats.peak_bytes.at(job_.rank() % p.devices().size());
      if (peak)
        trace_.counters.push_back(
            {job_.rank(), "memory_peak_bytes", offset, static_cast<double>(peak)});
    } else {
      for (const MemoryPeak& m : memory_peaks(p.devices(), stats.peak_bytes)) {
        if (!m.peak_bytes) continue;
        const std::string name = m.devices.size() == 1
                                     ? std::string("memory_peak_bytes")
                                     : fmt::format("memory_peak_bytes {} (devices {})", m.name,
                                                   fmt::join(m.devices, ","));
        trace_.counters.push_back(
            {m.devices.front(), name, offset, static_cast<double>(m.peak_bytes)});
      }
    }
    // Under MPI a rank knows its own device's timings; finish() gathers them.
    if (job_.mpi()) {
      traced_.push_back({stats.started_us, p.last_timings(), stats.exchanges});
    } else {
      reports_.push_back(
          analyze_step(p, p.last_timings(), trainer_.config().batch, stats.exchanges));
    }
  }
  if (tensorboard_) {
    tensorboard_->add_scalar("train/loss", static_cast<float>(stats.loss), step);
    tensorboard_->add_scalar("train/samples_per_s", static_cast<float>(samples_per_s), step);
    tensorboard_->add_scalar("train/learning_rate",
                             static_cast<float>(trainer_.learning_rate(step - 1)), step);
    if (const LossScaler* scaler = trainer_.loss_scaler()) {
      // The scale this step's backward started from, and the steps skipped up to this one.
      tensorboard_->add_scalar("train/loss_scale", static_cast<float>(stats.loss_scale), step);
      tensorboard_->add_scalar("train/skipped_steps", static_cast<float>(scaler->skipped_steps()),
                               step);
    }
  }
}

void Observers::finish(const Result& r, const std::vector<MemoryPeak>& memory) {
  if (tensorboard_) {
    if (!std::isnan(r.test_metric))
      tensorboard_->add_scalar("test/" + r.metric_name, static_cast<float>(r.test_metric), r.steps);
    tensorboard_->close();
  }
  write_trace();
  if (!options_.report.empty()) {
    if (job_.mpi()) gather_reports();
    if (!job_.mpi() || (trainer_.pipeline().owns_loss() && trainer_.replica() == 0))
      write_report(r, memory);
  }
}

void Observers::write_trace() {
  const bool want_trace = !options_.trace.empty() || !options_.timeline.empty();
  trace::Trace merged = trace_;
  if (want_trace && job_.mpi()) {
    // Every rank's spans and clock offset to rank 0, merged on rank 0.
    const auto jsons = job_.gather(trace::to_chrome_json(trace_).dump());
    const auto offsets = job_.gather(fmt::format("{}", job_.clock_offset_us()));
    if (job_.rank() != 0) return;  // rank 0 writes the merged trace
    std::vector<trace::Trace> traces;
    std::vector<double> offs;
    for (size_t i = 0; i < jsons.size(); ++i) {
      traces.push_back(trace::from_chrome_json(nlohmann::json::parse(jsons[i])));
      offs.push_back(std::stod(offsets[i]));
    }
    merged = trace::merge(std::move(traces), offs);
  }
  // Times start at the first traced action.
  double origin = merged.spans.empty() ? 0 : merged.spans.front().start_us;
  for (const auto& s : merged.spans) origin = std::min(origin, s.start_us);
  for (auto& s : merged.spans) s.start_us -= origin;
  for (auto& c : merged.counters) c.ts_us = std::max(0.0, c.ts_us - origin);
  const auto& p = trainer_.pipeline();
  merged.metadata["schedule"] = p.schedule().name;
  merged.metadata["partition"] = p.partition().to_string(p.model());
  if (!options_.trace.empty()) write_output_file(options_.trace, trace::chrome_trace_text(merged));
  if (!options_.timeline.empty()) {
    trace::SvgOptions svg;
    svg.title = fmt::format("tandem: {} on {} stages, {} micro-batches (steps {}..{})",
                            p.schedule().name, p.partition().num_stages,
                            p.schedule().num_microbatches, 2, 1 + options_.trace_steps);
    write_output_file(options_.timeline, trace::render_svg(merged, svg));
  }
}

void Observers::gather_reports() {
  // Each rank timed its own device's actions, from its own step start: move them to rank 0's
  // clock (Cristian offsets, as for the trace) and analyze every traced step with all devices
  // of replica 0.
  const double offset = job_.clock_offset_us();
  nlohmann::json mine = nlohmann::json::array();
  for (const TracedStep& step : traced_) {
    nlohmann::json timings = nlohmann::json::array();
    for (const runtime::ActionTiming& t : step.timings)
      timings.push_back({t.device, schedule::to_string(t.action), t.start_us, t.end_us});
    nlohmann::json exchanges = nlohmann::json::array();
    for (size_t d = 0; d < step.exchanges.size(); ++d)
      for (const spatial::Exchange& e : step.exchanges[d])
        exchanges.push_back({d, e.start_us, e.end_us, e.bytes_sent});
    mine.push_back(
        {{"origin_us", step.origin_us + offset}, {"timings", timings}, {"exchanges", exchanges}});
  }
  const nlohmann::json part = {{"replica", trainer_.replica()}, {"steps", mine}};
  const std::vector<std::string> parts = job_.all_gather(part.dump());
  if (!trainer_.pipeline().owns_loss() || trainer_.replica() != 0) return;
  std::vector<nlohmann::json> ranks;
  for (const std::string& text : parts) {
    nlohmann::json j = nlohmann::json::parse(text);
    if (j.at("replica").get<int>() == 0) ranks.push_back(std::move(j));
  }
  for (size_t k = 0; k < traced_.size(); ++k) {
    double first = 0;
    for (size_t q = 0; q < ranks.size(); ++q) {
      const double o = ranks[q].at("steps").at(k).at("origin_us").get<double>();
      first = q == 0 ? o : std::min(first, o);
    }
    std::vector<runtime::ActionTiming> all;
    std::vector<std::vector<spatial::Exchange>> exchanges(trainer_.pipeline().devices().size());
    for (const nlohmann::json& rank : ranks) {
      const nlohmann::json& step = rank.at("steps").at(k);
      const double shift = step.at("origin_us").get<double>() - first;
      for (const nlohmann::json& t : step.at("timings")) {
        all.push_back({t.at(0).get<int>(), schedule::parse_action(t.at(1).get<std::string>()),
                       t.at(2).get<double>() + shift, t.at(3).get<double>() + shift});
      }
      for (const nlohmann::json& e : step.at("exchanges")) {
        spatial::Exchange x;
        x.start_us = e.at(1).get<double>() + shift;
        x.end_us = e.at(2).get<double>() + shift;
        x.bytes_sent = e.at(3).get<int64_t>();
        exchanges.at(e.at(0).get<size_t>()).push_back(x);
      }
    }
    reports_.push_back(analyze_step(trainer_.pipeline(), all, trainer_.config().batch, exchanges));
  }
}

double Observers::measured_step_seconds() const {
  std::vector<double> later(step_seconds_.begin() + (step_seconds_.size() > 1 ? 1 : 0),
                            step_seconds_.end());
  if (later.empty()) return 0;
  std::sort(later.begin(), later.end());
  return later[later.size() / 2];
}

void Observers::write_report(const Result& r, const std::vector<MemoryPeak>& memory) {
  const auto& p = trainer_.pipeline();
  nlohmann::json j;
  j["steps"] = r.steps;
  j["loss"] = r.loss;
  j["test_" + r.metric_name] = r.test_metric;
  j["samples_per_s"] = r.samples_per_s;
  j["seconds"] = r.seconds;
  if (!r.weights.empty()) j["weights"] = r.weights;
  j["schedule"] = p.schedule().name;
  j["microbatches"] = p.schedule().num_microbatches;
  j["partition"] = p.partition().to_string(p.model());
  j["precision"] = name_of(trainer_.config().precision);
  if (trainer_.loss_scaler()) {
    // The scale of the next step, the steps skipped over the whole run (a resumed run's
    // checkpoint's included) and which of this run's steps they were.
    j["loss_scale"] = {
        {"scale", r.loss_scale}, {"skipped_steps", r.skipped_steps}, {"skipped", skipped_}};
  }
  // What this process's CPU arithmetic depended on (tandem numerics prints the same).
  nlohmann::json numerics = nlohmann::json::object();
  for (const auto& [name, value] : cpu_numerics()) numerics[name] = value;
  j["numerics"] = numerics;
  double measured = 0, predicted = 0, flops = 0, seconds = 0;
  std::vector<double> busy(p.devices().size(), 0), comm(p.devices().size(), 0);
  std::vector<double> exchange(p.devices().size(), 0), exchange_bytes(p.devices().size(), 0);
  for (const auto& s : reports_) {
    measured += s.measured_bubble;
    predicted += s.predicted_bubble;
    flops += s.flops;
    seconds += s.seconds;
    for (size_t d = 0; d < busy.size(); ++d) {
      busy[d] += s.busy[d] / reports_.size();
      comm[d] += s.comm[d] / reports_.size();
      if (d < s.exchange.size()) {
        exchange[d] += s.exchange[d] / reports_.size();
        exchange_bytes[d] += static_cast<double>(s.exchange_bytes[d]) / reports_.size();
      }
    }
  }
  const double n = std::max<size_t>(1, reports_.size());
  j["traced_steps"] = reports_.size();
  j["bubble_measured"] = measured / n;
  j["bubble_predicted"] = predicted / n;
  j["flops_per_s"] = seconds > 0 ? flops / seconds : 0;
  // A device's peak: the largest of the memories it uses (of its replicas, under MPI).
  std::vector<uint64_t> device_peaks(busy.size(), 0);
  for (const MemoryPeak& m : memory)
    for (int d : m.devices) device_peaks[d] = std::max(device_peaks[d], m.peak_bytes);
  nlohmann::json devices = nlohmann::json::array();
  for (size_t d = 0; d < busy.size(); ++d) {
    nlohmann::json e = {{"device", p.devices()[d].name},
                        {"busy", busy[d]},
                        {"idle", 1 - busy[d]},
                        {"comm", comm[d]},
                        {"peak_bytes", device_peaks[d]}};
    if (p.slabs() > 1) {
      // Inside compute actions: part of "busy" (halos and whole-sample sums, waits included).
      e["slab_exchange"] = exchange[d];
      e["slab_exchange_bytes_per_step"] = exchange_bytes[d];
    }
    devices.push_back(e);
  }
  j["devices"] = devices;
  // Sum these, not the devices' peak_bytes: devices that share a GPU repeat its number.
  nlohmann::json memories = nlohmann::json::array();
  for (const MemoryPeak& m : memory) {
    nlohmann::json e = {{"memory", m.label}, {"peak_bytes", m.peak_bytes}, {"devices", m.devices}};
    if (m.rank >= 0) e["rank"] = m.rank;
    memories.push_back(e);
  }
  j["memory"] = memories;
  if (options_.predicted) {
    j["auto"] = {{"flags", options_.predicted->flags},
                 {"predicted_step_seconds", options_.predicted->step_seconds},
                 {"measured_step_seconds", measured_step_seconds()},
                 {"predicted_peak_bytes", options_.predicted->peak_bytes},
                 {"planned_peak_bytes", options_.predicted->planned_bytes},
                 {"measured_peak_bytes", device_peaks}};
  }
  write_output_file(options_.report, j.dump(2) + "\n");
  std::printf("%sreport: bubble measured=%.4f predicted=%.4f flops_per_s=%.3g (%s)\n",
              job_.prefix().c_str(), measured / n, predicted / n, seconds > 0 ? flops / seconds : 0,
              options_.report.c_str());
}

}  // namespace tandem::train
