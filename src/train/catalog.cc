// Models and data sets by name: tandem's own, and those a program registers.
#include "tandem/train/catalog.h"

#include <fmt/format.h>

#include <algorithm>
#include <deque>
#include <mutex>
#include <utility>

#include "tandem/common/check.h"

namespace tandem::train {

// tandem's own: one function per file of src/train/models/ and src/train/data/, listed by the
// build (cmake: tandem_kind_list) in the generated files included here.
#define TANDEM_KIND(id) ModelKind model_kind_##id();
#include "train/model_kinds.inc"
#undef TANDEM_KIND
#define TANDEM_KIND(id) std::vector<DataKind> data_kinds_##id();
#include "train/data_kinds.inc"
#undef TANDEM_KIND

namespace {

bool last(const ModelKind& k) { return !k.suffix.empty(); }
bool last(const DataKind& k) { return k.folder; }

template <typename Kind>
struct Table {
  std::mutex mu;
  std::deque<Kind> kinds;  // a deque: entries stay where they are
  size_t builtin = 0;      // the first `builtin` are tandem's own

  const Kind* find(const std::string& name) {
    for (const Kind& k : kinds)
      if (k.name == name) return &k;
    return nullptr;
  }
  void add(Kind kind, const char* what) {
    std::lock_guard<std::mutex> lock(mu);
    TANDEM_CHECK(!find(kind.name), "register_{}: a {} named '{}' exists already", what, what,
                 kind.name);
    kinds.push_back(std::move(kind));
  }
  // Sorts tandem's own by name (a model matched by suffix last); a program's follow in the
  // order registered.
  void seal() {
    std::sort(kinds.begin(), kinds.end(), [](const Kind& a, const Kind& b) {
      return std::make_pair(last(a), a.name) < std::make_pair(last(b), b.name);
    });
    builtin = kinds.size();
  }
};

Table<ModelKind>& models() {
  static Table<ModelKind>* t = [] {
    auto* out = new Table<ModelKind>;
#define TANDEM_KIND(id) out->kinds.push_back(model_kind_##id());
#include "train/model_kinds.inc"
#undef TANDEM_KIND
    out->seal();
    return out;
  }();
  return *t;
}

Table<DataKind>& data_sets() {
  static Table<DataKind>* t = [] {
    auto* out = new Table<DataKind>;
#define TANDEM_KIND(id) \
  for (DataKind & k : data_kinds_##id()) out->kinds.push_back(std::move(k));
#include "train/data_kinds.inc"
#undef TANDEM_KIND
    out->seal();
    return out;
  }();
  return *t;
}

bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() > suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string model_words(const ModelKind& k) {
  return k.suffix.empty() ? k.name : fmt::format("a path to an {} file", k.suffix);
}

std::string data_words(const DataKind& k) { return k.folder ? k.name + ":DIR" : k.name; }

const char* target_words(ModelNeeds::Target t) {
  switch (t) {
    case ModelNeeds::Target::kClasses:
      return "class labels";
    case ModelNeeds::Target::kMask:
      return "0/1 masks";
    case ModelNeeds::Target::kReal:
      return "real-valued targets";
  }
  return "targets";
}

// The part of --data before the colon (the whole name without one).
std::string data_name(const std::string& data) { return data.substr(0, data.find(':')); }

}  // namespace

std::vector<std::string> models_that(const Config& c,
                                     const std::function<bool(const ModelNeeds&)>& take) {
  Table<ModelKind>& t = models();
  std::lock_guard<std::mutex> lock(t.mu);
  std::vector<std::string> out;
  for (const ModelKind& k : t.kinds) {
    if (!k.suffix.empty()) continue;
    const ModelNeeds n = k.needs(c);
    if (!n.any_data && take(n)) out.push_back(k.name);
  }
  return out;
}

std::string one_of(const std::vector<std::string>& words) {
  if (words.empty()) return "";
  if (words.size() == 1) return words[0];
  std::string out;
  for (size_t i = 0; i + 1 < words.size(); ++i) out += (i ? ", " : "") + words[i];
  return out + " or " + words.back();
}

void register_model(ModelKind kind) {
  TANDEM_CHECK(!kind.name.empty(), "register_model: the model needs a name");
  TANDEM_CHECK(kind.needs && kind.make, "register_model: model '{}' needs both `needs` and `make`",
               kind.name);
  models().add(std::move(kind), "model");
}

void register_data(DataKind kind) {
  TANDEM_CHECK(!kind.name.empty() && kind.name.find(':') == std::string::npos,
               "register_data: the data set needs a name without a colon, not '{}'", kind.name);
  TANDEM_CHECK(static_cast<bool>(kind.make), "register_data: data set '{}' has no `make`",
               kind.name);
  data_sets().add(std::move(kind), "data");
}

std::vector<std::string> model_names() {
  Table<ModelKind>& t = models();
  std::lock_guard<std::mutex> lock(t.mu);
  std::vector<std::string> out;
  for (const ModelKind& k : t.kinds) out.push_back(model_words(k));
  return out;
}

std::vector<std::string> data_names() {
  Table<DataKind>& t = data_sets();
  std::lock_guard<std::mutex> lock(t.mu);
  std::vector<std::string> out;
  for (const DataKind& k : t.kinds) out.push_back(data_words(k));
  return out;
}

std::string catalog_help() {
  std::string out = "Models (Config::model):\n";
  {
    Table<ModelKind>& t = models();
    std::lock_guard<std::mutex> lock(t.mu);
    for (const ModelKind& k : t.kinds)
      out += fmt::format("  {:<16} {}\n", k.suffix.empty() ? k.name : "PATH" + k.suffix, k.summary);
  }
  out += "Data sets (Config::data):\n";
  Table<DataKind>& t = data_sets();
  std::lock_guard<std::mutex> lock(t.mu);
  for (const DataKind& k : t.kinds) out += fmt::format("  {:<16} {}\n", data_words(k), k.summary);
  return out;
}

const ModelKind& model_kind(const std::string& model) {
  Table<ModelKind>& t = models();
  {
    std::lock_guard<std::mutex> lock(t.mu);
    for (const ModelKind& k : t.kinds)
      if (k.suffix.empty() ? k.name == model : ends_with(model, k.suffix)) return k;
  }
  TANDEM_CHECK(false, "unknown model '{}'; use {}", model, one_of(model_names()));
}

const DataKind& data_kind(const std::string& data) {
  Table<DataKind>& t = data_sets();
  {
    std::lock_guard<std::mutex> lock(t.mu);
    if (const DataKind* k = t.find(data_name(data))) {
      const bool colon = data.find(':') != std::string::npos;
      TANDEM_CHECK(colon == k->folder,
                   k->folder
                       ? "Config::data = {}: {} reads a folder of your own files; give {}:DIR"
                       : "Config::data = {}: {} is a data set of its own and takes no folder; give "
                         "Config::data = {} (Config::data_dir for another copy of its files)",
                   data, k->name, k->name);
      return *k;
    }
  }
  TANDEM_CHECK(false, "unknown data set '{}'; use {}", data, one_of(data_names()));
}

graph::Model make_model(const Config& c, const std::vector<int64_t>& input_shape) {
  TANDEM_ASSERT(!input_shape.empty(), "a source gives the shape of its samples");
  const ModelKind& k = model_kind(c.model);
  TANDEM_CHECK(
      k.takes_loss || (c.loss.empty() && c.output.empty()),
      "Config::loss and Config::output choose the loss of a model from an ONNX file; model {} has "
      "its own",
      c.model);
  return k.make(c, input_shape);
}

void check_sample(const Config& c, const std::vector<int64_t>& input_shape) {
  const ModelKind& k = model_kind(c.model);
  if (k.check_sample) k.check_sample(c, input_shape);
}

ModelNeeds model_needs(const Config& c) { return model_kind(c.model).needs(c); }

std::unique_ptr<Source> make_source(const Config& c, const ModelNeeds& needs) {
  const DataKind& d = data_kind(c.data);
  if (d.folder) {
    const std::string dir = c.data.substr(c.data.find(':') + 1);
    TANDEM_CHECK(!dir.empty(), "Config::data = {} names no folder; give {}DIR", c.data, c.data);
    return d.make(c, dir, needs);
  }
  if (!needs.any_data) {
    // The data sets of their own that this model takes, and the models that take this one.
    std::vector<std::string> fitting_data, fitting_models;
    {
      Table<DataKind>& t = data_sets();
      std::lock_guard<std::mutex> lock(t.mu);
      for (const DataKind& k : t.kinds)
        if (!k.folder && k.volumes == needs.volumes && k.target == needs.target)
          fitting_data.push_back(k.name);
    }
    fitting_models = models_that(
        c, [&d](const ModelNeeds& n) { return n.volumes == d.volumes && n.target == d.target; });
    const std::string instead = fmt::format(
        "use Config::data = {}{}", fitting_data.empty() ? "nifti:DIR" : one_of(fitting_data),
        fitting_models.empty() ? std::string()
                               : fmt::format(", or Config::model = {}", one_of(fitting_models)));
    TANDEM_CHECK(d.volumes == needs.volumes, "model {} {}, but Config::data = {} gives {}: {}",
                 c.model, needs.volumes ? "needs volumes" : "takes no volumes", c.data,
                 d.volumes ? "volumes" : "no volumes", instead);
    TANDEM_CHECK(d.target == needs.target, "Config::data = {} gives {}, but model {} needs {}: {}",
                 c.data, target_words(d.target), c.model, target_words(needs.target), instead);
  } else {
    // A model of any data (an ONNX graph) whose loss wants class labels, on voxel-wise labels:
    // its loss is what to change.
    TANDEM_CHECK(!d.volumes || needs.target != ModelNeeds::Target::kClasses ||
                     d.target == ModelNeeds::Target::kClasses,
                 "Config::data = {} gives {}, but model {} with Config::loss = {} needs {}: give "
                 "Config::loss = dice or dice+bce (0/1 masks) or mse (real-valued labels)",
                 c.data, target_words(d.target), c.model,
                 c.loss.empty() ? "cross-entropy (the default)" : c.loss,
                 target_words(needs.target));
  }
  return d.make(c, c.data_dir, needs);
}

}  // namespace tandem::train
