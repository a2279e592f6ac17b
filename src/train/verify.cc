#include "tandem/train/verify.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/csrc/jit/serialization/pickle.h>

#include <algorithm>
#include <cmath>
#include <sstream>

#include "tandem/common/check.h"

namespace tandem::train {

namespace {

std::string joined(const std::set<std::string>& devices) {
  return devices.empty() ? "-" : fmt::format("{}", fmt::join(devices, ","));
}

torch::Tensor to_cpu64(const torch::Tensor& t) {
  return t.detach().to(torch::kCPU, torch::kFloat64).contiguous();
}

c10::Dict<std::string, at::Tensor> as_dict(const std::map<std::string, torch::Tensor>& m) {
  c10::Dict<std::string, at::Tensor> d;
  for (const auto& [k, v] : m) d.insert(k, v);
  return d;
}

std::map<std::string, torch::Tensor> from_dict(const c10::IValue& v) {
  std::map<std::string, torch::Tensor> m;
  for (const auto& e : v.toGenericDict()) m[e.key().toStringRef()] = e.value().toTensor();
  return m;
}

}  // namespace

// "layer f device" and "layer b device" lines.
std::string pack_places(const std::map<int, LayerPlaces>& places) {
  std::string s;
  for (const auto& [layer, p] : places) {
    for (const std::string& d : p.forward) s += fmt::format("{} f {}\n", layer, d);
    for (const std::string& d : p.backward) s += fmt::format("{} b {}\n", layer, d);
  }
  return s;
}

std::map<int, LayerPlaces> unpack_places(const std::string& text) {
  std::map<int, LayerPlaces> places;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    int layer = -1;
    std::string kind;
    words >> layer >> kind;
    std::string device;
    std::getline(words, device);
    if (!device.empty() && device.front() == ' ') device.erase(0, 1);
    TANDEM_CHECK(layer >= 0 && (kind == "f" || kind == "b") && !device.empty(),
                 "a placement line '{}' that no process writes", line);
    (kind == "f" ? places[layer].forward : places[layer].backward).insert(device);
  }
  return places;
}

void merge_places(std::map<int, LayerPlaces>& into, const std::map<int, LayerPlaces>& more) {
  for (const auto& [layer, p] : more) {
    into[layer].forward.insert(p.forward.begin(), p.forward.end());
    into[layer].backward.insert(p.backward.begin(), p.backward.end());
  }
}

std::string places_table(const graph::Model& model, const graph::Partition& partition,
                         const std::map<int, LayerPlaces>& places) {
  size_t name = 24, on = 16;
  for (const graph::Layer& l : model.layers) name = std::max(name, l.name.size());
  for (const auto& [layer, p] : places)
    on = std::max({on, joined(p.forward).size(), joined(p.backward).size()});
  std::string out = fmt::format("{:<{}} {:<6} {:<{}} {:<{}}\n", "layer", name, "stage",
                                "forward ran on", on, "backward ran on", on);
  for (size_t i = 0; i < model.layers.size(); ++i) {
    const auto p = places.find(static_cast<int>(i));
    out += fmt::format("{:<{}} {:<6} {:<{}} {:<{}}\n", model.layers[i].name, name,
                       i < partition.stage_of_layer.size() ? partition.stage_of_layer[i] : -1,
                       p == places.end() ? "-" : joined(p->second.forward), on,
                       p == places.end() ? "-" : joined(p->second.backward), on);
  }
  return out;
}

std::string Tolerance::describe(int64_t samples, int64_t elements) const {
  const std::string eps = epsilon == std::ldexp(1.0, -23)   ? "2^-23 of float32"
                          : epsilon == std::ldexp(1.0, -52) ? "2^-52 of float64"
                                                            : fmt::format("{:.3g}", epsilon);
  const std::string times = factor > 1 ? fmt::format(" x {} steps", factor) : std::string();
  return fmt::format("8 * eps * sqrt(N){} = {:.2g} (eps {}, N = {} samples x {} elements)", times,
                     value, eps, samples, elements);
}

Tolerance gradient_tolerance(torch::ScalarType dtype, int64_t samples, int64_t elements,
                             int64_t steps) {
  TANDEM_CHECK(dtype == torch::kFloat32 || dtype == torch::kFloat64,
               "gradients of {} are not compared; float32 and float64 are", c10::toString(dtype));
  Tolerance t;
  t.epsilon = std::ldexp(1.0, dtype == torch::kFloat32 ? -23 : -52);
  t.terms = std::max<int64_t>(1, samples) * std::max<int64_t>(1, elements);
  t.factor = static_cast<double>(std::max<int64_t>(1, steps));
  t.value = 8 * t.epsilon * std::sqrt(static_cast<double>(t.terms)) * t.factor;
  return t;
}

Config reference_config(const Config& c) {
  TANDEM_CHECK(c.precision == Precision::kFp32,
               "tandem verify compares fp32 runs (its tolerance follows fp32's rounding): drop "
               "--precision {}",
               name_of(c.precision));
  Config r = c;
  r.devices = "1";
  r.devices_given = true;
  r.threads_per_device = std::max(1, c.threads_per_device);
  r.lend_idle_cores = false;
  r.balance.clear();
  r.partition = PartitionBy::kParameters;
  r.stages = 0;
  r.spatial = 1;
  r.replicas = 1;
  r.transport = TransportKind::kInProcess;
  r.schedule = "sequential";
  r.microbatches = 1;
  r.virtual_stages = 1;
  r.recompute = false;
  r.device_memory = 0;
  r.log_placement = false;
  r.faults.clear();
  r.batch = c.batch * c.replicas;
  r.progress = trace::Progress::Mode::kNone;
  r.save_dir.clear();
  r.save_every = 0;
  r.overwrite = false;
  r.resume.clear();
  r.eval_only = false;
  r.plan_only = false;
  return r;
}

bool Comparison::ok() const { return first_failure() == nullptr; }

const ParameterCheck* Comparison::first_failure() const {
  for (const ParameterCheck& p : parameters)
    if (!p.ok) return &p;
  return nullptr;
}

std::string Comparison::table(const std::string& what) const {
  size_t name = 9, on = 11;  // "parameter", "backward on"
  for (const ParameterCheck& p : parameters) {
    name = std::max(name, p.name.size());
    on = std::max({on, p.forward.size(), p.backward.size()});
  }
  std::string s = fmt::format("{:<{}} {:>5}  {:<{}} {:<{}} {:>14} {:>14} {:>10} {:>9}  {}\n",
                              "parameter", name, "stage", "forward on", on, "backward on", on,
                              what + " norm", "on 1 device", "difference", "allowed", "verdict");
  for (const ParameterCheck& p : parameters) {
    s += fmt::format("{:<{}} {:>5}  {:<{}} {:<{}} {:>14.6g} {:>14.6g} {:>10.2e} {:>9.1e}  {}\n",
                     p.name, name, p.stage, p.forward, on, p.backward, on, p.norm, p.reference_norm,
                     p.difference, p.allowed, p.ok ? "ok" : "DIFFERS");
  }
  return s;
}

double relative_difference(const torch::Tensor& got, const torch::Tensor& want) {
  const torch::Tensor a = to_cpu64(got), b = to_cpu64(want);
  const double scale = b.numel() ? b.abs().max().item<double>() : 0.0;
  const double diff = a.numel() ? (a - b).abs().max().item<double>() : 0.0;
  return diff == 0 ? 0.0 : scale > 0 ? diff / scale : INFINITY;
}

Comparison compare(const graph::Model& model, const graph::Partition& partition,
                   const std::map<std::string, torch::Tensor>& got,
                   const std::map<std::string, torch::Tensor>& want,
                   const std::map<int, LayerPlaces>& places, const Tolerance& tolerance,
                   const std::map<std::string, torch::Tensor>* reordered) {
  Comparison c;
  c.tolerance = tolerance;
  for (size_t i = 0; i < model.layers.size(); ++i) {
    const graph::Layer& layer = model.layers[i];
    const auto where = places.find(static_cast<int>(i));
    for (const auto& [name, unused] : graph::named_parameters(layer)) {
      const auto g = got.find(name), w = want.find(name);
      TANDEM_CHECK(g != got.end(), "the split run gave no value for parameter {}", name);
      TANDEM_CHECK(w != want.end(), "the one-device run gave no value for parameter {}", name);
      TANDEM_CHECK(g->second.sizes() == w->second.sizes(),
                   "parameter {} has shape [{}] in the split run and [{}] on one device", name,
                   fmt::join(g->second.sizes(), ","), fmt::join(w->second.sizes(), ","));
      ParameterCheck p;
      p.name = name;
      p.layer = layer.name;
      p.stage = i < partition.stage_of_layer.size() ? partition.stage_of_layer[i] : -1;
      p.forward = where == places.end() ? "-" : joined(where->second.forward);
      p.backward = where == places.end() ? "-" : joined(where->second.backward);
      p.norm = to_cpu64(g->second).norm().item<double>();
      p.reference_norm = to_cpu64(w->second).norm().item<double>();
      p.difference = relative_difference(g->second, w->second);
      p.allowed = tolerance.value;
      if (reordered) {
        const auto r = reordered->find(name);
        TANDEM_CHECK(r != reordered->end(), "the reordered one-device run gave no value for {}",
                     name);
        const double own = relative_difference(r->second, w->second);
        if (std::isfinite(own)) p.allowed = std::max(p.allowed, 16 * own);
      }
      p.ok = std::isfinite(p.difference) && p.difference <= p.allowed;
      c.parameters.push_back(std::move(p));
    }
  }
  return c;
}

std::map<std::string, torch::Tensor> gradients_of(
    const std::vector<std::pair<std::string, torch::Tensor>>& named) {
  std::map<std::string, torch::Tensor> m;
  for (const auto& [name, p] : named)
    m[name] = p.grad().defined() ? to_cpu64(p.grad()) : torch::zeros(p.sizes(), torch::kFloat64);
  return m;
}

std::map<std::string, torch::Tensor> values_of(
    const std::vector<std::pair<std::string, torch::Tensor>>& named) {
  std::map<std::string, torch::Tensor> m;
  for (const auto& [name, p] : named) m[name] = to_cpu64(p);
  return m;
}

std::map<int, LayerPlaces> places_of(const runtime::PlacementLog& log, const std::string& prefix) {
  std::map<int, LayerPlaces> places;
  for (const auto& [layer, devices] : log.forward())
    for (const std::string& d : devices) places[layer].forward.insert(prefix + d);
  for (const auto& [layer, devices] : log.backward())
    for (const std::string& d : devices) places[layer].backward.insert(prefix + d);
  return places;
}

std::string Findings::pack() const {
  const std::vector<char> bytes = torch::pickle_save(c10::ivalue::Tuple::create(
      {as_dict(gradients), as_dict(weights), pack_places(places), has_loss, loss}));
  return std::string(bytes.begin(), bytes.end());
}

Findings Findings::unpack(const std::string& text) {
  const c10::IValue v = torch::pickle_load(std::vector<char>(text.begin(), text.end()));
  const std::vector<c10::IValue> items = v.toTupleRef().elements().vec();
  TANDEM_CHECK(items.size() == 5, "a process's findings of {} items, not 5", items.size());
  Findings f;
  f.gradients = from_dict(items[0]);
  f.weights = from_dict(items[1]);
  f.places = unpack_places(items[2].toStringRef());
  f.has_loss = items[3].toBool();
  f.loss = items[4].toDouble();
  return f;
}

void Findings::merge(const Findings& other) {
  const auto add = [this](std::map<std::string, torch::Tensor>& into,
                          const std::map<std::string, torch::Tensor>& more) {
    for (const auto& [k, v] : more) {
      const auto [at, fresh] = into.emplace(k, v);
      if (!fresh && !torch::equal(at->second, v) &&
          std::find(replicas_differ.begin(), replicas_differ.end(), k) == replicas_differ.end())
        replicas_differ.push_back(k);
    }
  };
  add(gradients, other.gradients);
  add(weights, other.weights);
  merge_places(places, other.places);
  if (other.has_loss && !has_loss) {
    has_loss = true;
    loss = other.loss;
  }
}

}  // namespace tandem::train
