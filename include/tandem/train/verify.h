// A proof for one's own split: the gradients of one step of a configuration (and, after several
// steps, its weights) against the same model from the same weights on one device on the whole
// batch, parameter by parameter, with the devices each layer's forward and backward ran on as
// recorded while they ran (runtime/placement_log.h). `tandem verify` prints it.
//
// The tolerance. A split adds the terms of a gradient in another order than one device does
// (per micro-batch, per slab, per replica, then together), so every gradient may move by float
// rounding. A weight gradient sums at most N terms, N = the global batch times the elements of
// one sample's input (each weight meets each input position of each sample at most once per
// layer); sums of N terms that round independently move by about eps * sqrt(N) of their
// magnitude. The verdict allows
//
//   difference = max |g - g_ref| / max |g_ref|  <=  8 * eps * sqrt(N)
//
// per parameter (eps = 2^-23 for float32, 2^-52 for float64): 7.6e-5 for 32 MNIST images,
// 6.9e-4 for 2 samples of 64^3. A gradient whose terms cancel (a bias whose output gradients
// are of both signs) is small against its terms, and its rounding large against it: so each
// parameter is also allowed 16 times its own rounding, the difference between the one-device
// step run whole and run in 2 micro-batches (the same sums in another order). A fault of the
// split (a message that lost its values, a micro-batch whose backward did not run, a halo of
// zeros) moves the gradients it touches by the share of the terms it took away, far above both.
// After several steps the weights are compared the same way, with the tolerance times the
// steps.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "tandem/graph/model.h"
#include "tandem/graph/partition.h"
#include "tandem/runtime/placement_log.h"
#include "tandem/train/config.h"

namespace tandem::train {

struct Tolerance {
  double value = 0;    // the largest difference a parameter may show
  double epsilon = 0;  // the dtype's machine epsilon
  int64_t terms = 0;   // N: the most terms one gradient sums
  double factor = 1;   // the steps the weights moved (1 for gradients)
  // "8 * eps * sqrt(N) = 7.6e-05 (eps 2^-23 of float32, N = 32 samples x 784 elements)".
  std::string describe(int64_t samples, int64_t elements) const;
};

// The tolerance of gradients in `dtype` (float32 or float64) summed over `samples` samples of
// `elements` input elements each; times `steps` for weights after that many steps.
Tolerance gradient_tolerance(torch::ScalarType dtype, int64_t samples, int64_t elements,
                             int64_t steps = 1);

// The one-device run `c` is checked against: the same model, data, seed, starting weights
// (init_from), optimizer and steps, on one CPU device in this process, the whole global batch
// (batch x replicas) in one piece, no pipeline, slabs, recomputation or budget, and nothing
// saved.
Config reference_config(const Config& c);

// The devices a layer's forward and backward ran on.
struct LayerPlaces {
  std::set<std::string> forward, backward;
};

struct ParameterCheck {
  std::string name;   // "<layer>.<param>"
  std::string layer;  // the layer's name
  int stage = -1;
  std::string forward, backward;  // devices, joined by ","; "-" where none was recorded
  double norm = 0, reference_norm = 0;
  double difference = 0;  // max |t - t_ref| / max |t_ref| (0 when both are zero)
  double allowed = 0;     // the tolerance, or 16 times the parameter's own rounding
  bool ok = false;
};

struct Comparison {
  std::vector<ParameterCheck> parameters;  // in the model's order
  Tolerance tolerance;
  bool ok() const;
  // The first parameter over the tolerance (null when none is).
  const ParameterCheck* first_failure() const;
  // One row per parameter: layer, stage, forward and backward devices, the norms of `what`
  // ("gradient", "weight") in both runs, the difference and the verdict.
  std::string table(const std::string& what) const;
};

// The difference of `got` from `want`: max |got - want| / max |want| (0 when equal, infinite
// when `want` is zero and `got` is not).
double relative_difference(const torch::Tensor& got, const torch::Tensor& want);

// Compares `got` with `want` (name -> tensor on the CPU) for every parameter of `model` cut by
// `partition`, with `places` per layer index. `reordered` (may be null): `want`'s run with its
// sums in another order; a parameter is then allowed 16 times its difference from `want` where
// that is above the tolerance. Throws tandem::Error when a parameter is missing from either,
// or their shapes differ.
Comparison compare(const graph::Model& model, const graph::Partition& partition,
                   const std::map<std::string, torch::Tensor>& got,
                   const std::map<std::string, torch::Tensor>& want,
                   const std::map<int, LayerPlaces>& places, const Tolerance& tolerance,
                   const std::map<std::string, torch::Tensor>* reordered = nullptr);

// The gradients (zeros where there is none) or the values of named parameters, copied to the
// CPU in float64.
std::map<std::string, torch::Tensor> gradients_of(
    const std::vector<std::pair<std::string, torch::Tensor>>& named);
std::map<std::string, torch::Tensor> values_of(
    const std::vector<std::pair<std::string, torch::Tensor>>& named);

// Per layer index, the devices of a placement log, each named `prefix` + device ("r2 " under
// MPI).
std::map<int, LayerPlaces> places_of(const runtime::PlacementLog& log, const std::string& prefix);

// The places as text for Job::gather ("layer f device" and "layer b device" lines), and back;
// merge_places adds `more` into `into`.
std::string pack_places(const std::map<int, LayerPlaces>& places);
std::map<int, LayerPlaces> unpack_places(const std::string& text);
void merge_places(std::map<int, LayerPlaces>& into, const std::map<int, LayerPlaces>& more);

// The table --log-placement prints: every layer, its stage, the devices its forward and its
// backward ran on ("-" where none was recorded).
std::string places_table(const graph::Model& model, const graph::Partition& partition,
                         const std::map<int, LayerPlaces>& places);

// What one process found, as text for Job::gather, and back; merge() adds another process's:
// tensors it lacks, places of every layer.
struct Findings {
  std::map<std::string, torch::Tensor> gradients, weights;
  std::map<int, LayerPlaces> places;
  bool has_loss = false;
  double loss = 0;
  // Parameters whose values from two ranks (replicas of one stage) were not the same bits:
  // replicas out of step, which merge() finds and a verification reports.
  std::vector<std::string> replicas_differ;
  std::string pack() const;
  static Findings unpack(const std::string& text);
  // Adds `other`'s values; a value both hold is kept once, and named in replicas_differ where
  // the two differ.
  void merge(const Findings& other);
};

}  // namespace tandem::train
