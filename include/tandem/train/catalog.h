// Models and data sets by name. Everything that chooses by --model or --data (the trainer, the
// command line's help and its errors) asks this catalog: a model is one ModelKind, a data set
// one DataKind. tandem's own are one file each under src/train/models/ and src/train/data/
// (found when the build is configured); a program adds its own with register_model() and
// register_data() before it builds a Trainer from a Config.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tandem/graph/model.h"
#include "tandem/train/config.h"
#include "tandem/train/source.h"

namespace tandem::train {

struct ModelKind {
  std::string name;     // --model NAME
  std::string summary;  // one line, for --help
  // Instead of a name: every --model ending in this (".onnx": a path to a file).
  std::string suffix;
  // Reads Config::loss and Config::output (a model with a loss of its own refuses them).
  bool takes_loss = false;
  // Comes with trained parameters of its own (an ONNX file's initializers): `tandem eval`
  // scores it without a checkpoint.
  bool has_weights = false;
  // What the model reads from a batch under these options: the data sets it takes.
  std::function<ModelNeeds(const Config&)> needs;
  // The model for samples of `input_shape` (Source::input_shape: [1,28,28], [C,D,H,W]) under
  // these options. The trainer calls it after torch::manual_seed(Config::seed), so that the
  // parameters are the seed's. Throws tandem::Error for options it cannot build.
  std::function<graph::Model(const Config&, const std::vector<int64_t>& input_shape)> make;
  // Refuses samples of `input_shape` that the model built for them would fail on at its first
  // step (an ONNX graph's size rule), before anything runs; null: make() checks all it can.
  std::function<void(const Config&, const std::vector<int64_t>& input_shape)> check_sample;
};

struct DataKind {
  std::string name;     // --data NAME, or NAME:DIR for a folder of one's own files
  std::string summary;  // one line, for --help
  // NAME:DIR: the samples are files in the folder DIR (given after the colon). Such a source
  // reads whatever the model needs and checks its files against it.
  bool folder = false;
  // A data set of its own (not a folder): whether its inputs are volumes [C,D,H,W] and what its
  // targets are. A model that needs others refuses it, naming those that fit.
  bool volumes = false;
  ModelNeeds::Target target = ModelNeeds::Target::kClasses;
  // The source under these options for a model with `needs`; `dir` is the folder after the
  // colon (folder kinds), else Config::data_dir. Throws tandem::Error naming bad files.
  std::function<std::unique_ptr<Source>(const Config&, const std::string& dir,
                                        const ModelNeeds& needs)>
      make;
};

// Adds a model or a data set; throws tandem::Error when the name is taken or the kind is
// incomplete. Thread-safe.
void register_model(ModelKind kind);
void register_data(DataKind kind);

// The kind --model or --data names (for a folder kind, the part before the colon). Unknown
// names throw tandem::Error listing the known ones.
const ModelKind& model_kind(const std::string& model);
const DataKind& data_kind(const std::string& data);

// Every name, for help texts: tandem's own in alphabetical order, then a program's own in the
// order registered. Suffix kinds as "a path to an .onnx file", folder kinds as "nifti:DIR".
std::vector<std::string> model_names();
std::vector<std::string> data_names();

// Every model and data set with its line of help, for --help: "models:\n  mlp  a multilayer..."
std::string catalog_help();

// The model of Config::model for samples of `input_shape`. Call torch::manual_seed first for
// the seed's parameters (the trainer does).
graph::Model make_model(const Config& c, const std::vector<int64_t>& input_shape);
// The model kind's check of the samples it is trained on (ModelKind::check_sample).
void check_sample(const Config& c, const std::vector<int64_t>& input_shape);

// What the model of Config::model reads from a batch.
ModelNeeds model_needs(const Config& c);

// The data set of Config::data for a model with `needs`, checked against them: a data set that
// gives volumes to a model that takes none, or targets of another kind, is refused with the
// data sets (or models) that would fit.
std::unique_ptr<Source> make_source(const Config& c, const ModelNeeds& needs);

// The names of the catalog's models (not those matched by suffix) whose needs under `c` pass
// `take`, for messages: "use --model conv3d-stack or unet3d".
std::vector<std::string> models_that(const Config& c,
                                     const std::function<bool(const ModelNeeds&)>& take);

// "a, b or c": the words of a list in a message.
std::string one_of(const std::vector<std::string>& words);

}  // namespace tandem::train
