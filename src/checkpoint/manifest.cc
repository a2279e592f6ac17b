#include "tandem/checkpoint/manifest.h"

#include <c10/core/ScalarType.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "tandem/checkpoint/files.h"
#include "tandem/common/check.h"

namespace tandem::checkpoint {
namespace {

using nlohmann::json;

constexpr const char* kFormatName = "tandem-checkpoint";

std::string shape_text(const std::vector<int64_t>& shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

json tensor_json(const TensorRecord& t) {
  return {{"name", t.name}, {"shape", t.shape}, {"dtype", t.dtype}, {"buffer", t.buffer}};
}

json shard_json(const ShardRecord& r) {
  return {{"file", r.file},
          {"stage", r.stage},
          {"layers", r.layers},
          {"bytes", r.bytes},
          {"crc32", crc32_hex(r.crc32)},
          {"optimizer", r.optimizer}};
}

uint32_t parse_crc(const std::string& text) {
  return static_cast<uint32_t>(std::stoul(text, nullptr, 16));
}

// Every number a manifest holds is a whole number; converting another to an integer field would
// be undefined (1e96 to int64), so a damaged file is refused first.
void check_whole_numbers(const json& j, const std::string& path) {
  TANDEM_CHECK(!j.is_number_float(),
               "'{}' holds the number {} where a checkpoint file has whole numbers only: the "
               "file is damaged.",
               path, j.dump());
  if (j.is_structured())
    for (const json& item : j) check_whole_numbers(item, path);
}

// The moments as decimal strings that read back to the same doubles (the manifest holds whole
// numbers only: a fraction there marks a damaged file).
json normalization_json(const data::Normalization& n) {
  auto texts = [](const std::vector<double>& values) {
    json list = json::array();
    for (double v : values) list.push_back(fmt::format("{}", v));
    return list;
  };
  return {{"mode", data::normalize_name(n.mode)},
          {"head", n.head},
          {"float32", n.in_float32},
          {"mean", texts(n.mean)},
          {"deviation", texts(n.deviation)}};
}

data::Normalization normalization_from_json(const json& j, const std::string& path) {
  data::Normalization n;
  const std::string mode = j.at("mode").get<std::string>();
  n.mode = mode == "default" ? data::Normalize::kDefault : data::parse_normalize(mode);
  n.head = j.at("head").get<bool>();
  n.in_float32 = j.at("float32").get<bool>();
  auto values = [&](const char* key) {
    std::vector<double> out;
    for (const json& t : j.at(key)) {
      const std::string text = t.get<std::string>();
      char* end = nullptr;  // strtod: subnormal values read back too (std::stod throws)
      const double v = std::strtod(text.c_str(), &end);
      TANDEM_CHECK(!text.empty() && end == text.c_str() + text.size(),
                   "'{}' holds '{}' as a normalization {}, not a number: the file is damaged.",
                   path, text, key);
      out.push_back(v);
    }
    return out;
  };
  n.mean = values("mean");
  n.deviation = values("deviation");
  TANDEM_CHECK(n.mean.size() == n.deviation.size(),
               "'{}' holds {} normalization means and {} deviations: the file is damaged.", path,
               n.mean.size(), n.deviation.size());
  return n;
}

ShardRecord shard_from_json(const json& j) {
  ShardRecord r;
  r.file = j.at("file").get<std::string>();
  r.stage = j.at("stage").get<int>();
  r.layers = j.at("layers").get<std::vector<std::string>>();
  r.bytes = j.at("bytes").get<int64_t>();
  r.crc32 = parse_crc(j.at("crc32").get<std::string>());
  r.optimizer = j.at("optimizer").get<std::string>();
  return r;
}

// Runs `parse`, turning JSON errors (syntax, missing key, wrong type) into one tandem::Error.
template <typename F>
auto parse_or_throw(const std::string& path, const char* what, F&& parse) {
  try {
    return parse();
  } catch (const json::exception& e) {
    TANDEM_CHECK(false,
                 "'{}' is not a valid {}: {}. The checkpoint is damaged; load an earlier one.",
                 path, what, e.what());
  } catch (const std::logic_error& e) {  // std::stoul on a malformed checksum
    TANDEM_CHECK(false,
                 "'{}' is not a valid {}: {}. The checkpoint is damaged; load an earlier one.",
                 path, what, e.what());
  }
}

}  // namespace

Fingerprint fingerprint(const graph::Model& model) {
  Fingerprint f;
  f.model = model.name;
  for (const auto& layer : model.layers) {
    LayerRecord l;
    l.name = layer.name;
    for (const auto& [name, p] : graph::named_parameters(layer)) {
      l.tensors.push_back({name, p.sizes().vec(), c10::toString(p.scalar_type()), false});
    }
    for (const auto& [name, b] : graph::named_buffers(layer)) {
      l.tensors.push_back({name, b.sizes().vec(), c10::toString(b.scalar_type()), true});
    }
    f.layers.push_back(std::move(l));
  }
  return f;
}

std::string first_difference(const Fingerprint& saved, const Fingerprint& current) {
  if (saved.model != current.model) {
    return fmt::format("the checkpoint holds model '{}' but this model is '{}'", saved.model,
                       current.model);
  }
  const size_t n = std::min(saved.layers.size(), current.layers.size());
  for (size_t i = 0; i < n; ++i) {
    const LayerRecord& a = saved.layers[i];
    const LayerRecord& b = current.layers[i];
    if (a.name != b.name) {
      return fmt::format("layer {} is '{}' in the checkpoint but '{}' in this model", i, a.name,
                         b.name);
    }
    const size_t m = std::min(a.tensors.size(), b.tensors.size());
    for (size_t k = 0; k < m; ++k) {
      const TensorRecord& x = a.tensors[k];
      const TensorRecord& y = b.tensors[k];
      if (x.name != y.name || x.buffer != y.buffer) {
        return fmt::format("layer '{}' holds {} '{}' in the checkpoint but {} '{}' in this model",
                           a.name, x.buffer ? "buffer" : "parameter", x.name,
                           y.buffer ? "buffer" : "parameter", y.name);
      }
      if (x.shape != y.shape) {
        return fmt::format("'{}' has shape {} in the checkpoint but {} in this model", x.name,
                           shape_text(x.shape), shape_text(y.shape));
      }
      if (x.dtype != y.dtype) {
        return fmt::format("'{}' is {} in the checkpoint but {} in this model", x.name, x.dtype,
                           y.dtype);
      }
    }
    if (a.tensors.size() != b.tensors.size()) {
      const bool more = a.tensors.size() > b.tensors.size();
      const TensorRecord& extra = more ? a.tensors[m] : b.tensors[m];
      return fmt::format(
          "layer '{}' has {} tensors in the checkpoint but {} in this model ('{}' "
          "only in the {})",
          a.name, a.tensors.size(), b.tensors.size(), extra.name, more ? "checkpoint" : "model");
    }
  }
  if (saved.layers.size() != current.layers.size()) {
    const bool more = saved.layers.size() > current.layers.size();
    return fmt::format(
        "the checkpoint has {} layers but this model has {} (layer '{}' is only in "
        "the {})",
        saved.layers.size(), current.layers.size(),
        more ? saved.layers[n].name : current.layers[n].name, more ? "checkpoint" : "model");
  }
  return "";
}

std::string to_json_text(const Manifest& m) {
  json layers = json::array();
  for (const auto& l : m.fingerprint.layers) {
    json tensors = json::array();
    for (const auto& t : l.tensors) tensors.push_back(tensor_json(t));
    layers.push_back({{"name", l.name}, {"tensors", tensors}});
  }
  json shards = json::array();
  for (const auto& s : m.shards) shards.push_back(shard_json(s));
  json state = {
      {"step", m.state.step},         {"epoch", m.state.epoch},
      {"position", m.state.position}, {"seed", m.state.seed},
      {"data", m.state.data},         {"normalization", normalization_json(m.state.normalization)}};
  // The scale as a decimal string that reads back to the same double (whole numbers only).
  if (m.state.loss_scale > 0)
    state["loss_scale"] = {{"scale", fmt::format("{}", m.state.loss_scale)},
                           {"clean_steps", m.state.loss_scale_clean_steps},
                           {"skipped_steps", m.state.skipped_steps}};
  json j = {
      {"format", kFormatName},
      {"version", m.version},
      {"state", state},
      {"model", {{"name", m.fingerprint.model}, {"layers", layers}}},
      {"partition",
       {{"balance", m.balance}, {"stage_device", m.stage_device}, {"devices", m.devices}}},
      {"world", {{"replicas", m.replicas}, {"ranks", m.ranks}}},
      {"shards", shards},
  };
  return j.dump(1) + "\n";
}

Manifest parse_manifest(const std::string& text, const std::string& path) {
  return parse_or_throw(path, "checkpoint manifest", [&] {
    json j = json::parse(text);
    check_whole_numbers(j, path);
    const std::string format = j.at("format").get<std::string>();
    TANDEM_CHECK(format == kFormatName, "'{}' is not a tandem checkpoint manifest (format '{}').",
                 path, format);
    Manifest m;
    m.version = j.at("version").get<int>();
    TANDEM_CHECK(m.version <= kFormatVersion,
                 "'{}' has checkpoint format version {}, newer than the {} this build reads; load "
                 "it with a newer tandem.",
                 path, m.version, kFormatVersion);
    const json& s = j.at("state");
    m.state.step = s.at("step").get<int64_t>();
    m.state.epoch = s.at("epoch").get<int64_t>();
    m.state.position = s.at("position").get<int64_t>();
    m.state.seed = s.at("seed").get<uint64_t>();
    m.state.data = s.value("data", std::string());  // absent in checkpoints from before it
    if (s.contains("normalization"))
      m.state.normalization = normalization_from_json(s.at("normalization"), path);
    if (s.contains("loss_scale")) {  // a run that scaled its loss
      const json& ls = s.at("loss_scale");
      const std::string scale = ls.at("scale").get<std::string>();
      char* end = nullptr;
      m.state.loss_scale = std::strtod(scale.c_str(), &end);
      TANDEM_CHECK(end == scale.c_str() + scale.size() && std::isfinite(m.state.loss_scale) &&
                       m.state.loss_scale > 0,
                   "'{}' holds '{}' as a loss scale, not a positive number: the file is damaged.",
                   path, scale);
      m.state.loss_scale_clean_steps = ls.at("clean_steps").get<int64_t>();
      m.state.skipped_steps = ls.at("skipped_steps").get<int64_t>();
    }
    m.fingerprint.model = j.at("model").at("name").get<std::string>();
    for (const json& l : j.at("model").at("layers")) {
      LayerRecord layer;
      layer.name = l.at("name").get<std::string>();
      for (const json& t : l.at("tensors")) {
        layer.tensors.push_back({t.at("name").get<std::string>(),
                                 t.at("shape").get<std::vector<int64_t>>(),
                                 t.at("dtype").get<std::string>(), t.at("buffer").get<bool>()});
      }
      m.fingerprint.layers.push_back(std::move(layer));
    }
    const json& p = j.at("partition");
    m.balance = p.at("balance").get<std::vector<int>>();
    m.stage_device = p.at("stage_device").get<std::vector<int>>();
    m.devices = p.at("devices").get<std::vector<std::string>>();
    m.replicas = j.at("world").at("replicas").get<int>();
    m.ranks = j.at("world").at("ranks").get<int>();
    for (const json& r : j.at("shards")) m.shards.push_back(shard_from_json(r));
    return m;
  });
}

Manifest read_manifest(const std::string& checkpoint) {
  const std::string path = (std::filesystem::path(checkpoint) / kManifestFile).string();
  TANDEM_CHECK(std::filesystem::exists(path),
               "'{}' is not a complete checkpoint: it has no {}. Give a complete folder "
               "'step-<N>' or the save directory that holds them.",
               checkpoint, kManifestFile);
  const std::vector<char> bytes = read_file(path);
  return parse_manifest(std::string(bytes.begin(), bytes.end()), path);
}

std::string shard_record_to_json_text(const ShardRecord& r) { return shard_json(r).dump(1) + "\n"; }

ShardRecord parse_shard_record(const std::string& text, const std::string& path) {
  return parse_or_throw(path, "shard record", [&] {
    const json j = json::parse(text);
    check_whole_numbers(j, path);
    return shard_from_json(j);
  });
}

}  // namespace tandem::checkpoint
