#include "config_words.h"

namespace tandem::train {

const Words<PartitionBy>& partition_words() {
  static const Words<PartitionBy> w = {{PartitionBy::kTime, "time"},
                                       {PartitionBy::kParameters, "parameters"},
                                       {PartitionBy::kMemory, "memory"},
                                       {PartitionBy::kFit, "fit"}};
  return w;
}
const Words<Precision>& precision_words() {
  static const Words<Precision> w = {
      {Precision::kFp32, "fp32"}, {Precision::kBf16, "bf16"}, {Precision::kFp16, "fp16"}};
  return w;
}
const Words<LossScaling>& loss_scaling_words() {
  static const Words<LossScaling> w = {{LossScaling::kAuto, "auto"},
                                       {LossScaling::kDynamic, "dynamic"},
                                       {LossScaling::kNone, "none"}};
  return w;
}
const Words<TransportKind>& transport_words() {
  static const Words<TransportKind> w = {{TransportKind::kAuto, "auto"},
                                         {TransportKind::kInProcess, "inprocess"},
                                         {TransportKind::kMpi, "mpi"}};
  return w;
}
const Words<MpiCuda>& mpi_cuda_words() {
  static const Words<MpiCuda> w = {
      {MpiCuda::kAuto, "auto"}, {MpiCuda::kStaged, "staged"}, {MpiCuda::kDirect, "direct"}};
  return w;
}
const Words<OptimizerKind>& optimizer_words() {
  static const Words<OptimizerKind> w = {{OptimizerKind::kAdam, "adam"},
                                         {OptimizerKind::kSgd, "sgd"}};
  return w;
}
const Words<LrSchedule>& lr_schedule_words() {
  static const Words<LrSchedule> w = {{LrSchedule::kCosine, "cosine"},
                                      {LrSchedule::kConstant, "constant"}};
  return w;
}
const Words<trace::Progress::Mode>& progress_words() {
  using Mode = trace::Progress::Mode;
  static const Words<Mode> w = {
      {Mode::kAuto, "auto"}, {Mode::kBar, "bar"}, {Mode::kLine, "line"}, {Mode::kNone, "none"}};
  return w;
}

std::string name_of(PartitionBy v) { return word_of(partition_words(), v); }
std::string name_of(TransportKind v) { return word_of(transport_words(), v); }
std::string name_of(MpiCuda v) { return word_of(mpi_cuda_words(), v); }
std::string name_of(OptimizerKind v) { return word_of(optimizer_words(), v); }
std::string name_of(Precision v) { return word_of(precision_words(), v); }
c10::ScalarType compute_type(Precision v) {
  switch (v) {
    case Precision::kBf16:
      return c10::kBFloat16;
    case Precision::kFp16:
      return c10::kHalf;
    default:
      return c10::kFloat;
  }
}
std::string name_of(LossScaling v) { return word_of(loss_scaling_words(), v); }
bool scales_loss(const Config& c) {
  return c.loss_scaling == LossScaling::kDynamic ||
         (c.loss_scaling == LossScaling::kAuto && c.precision == Precision::kFp16);
}
std::string name_of(LrSchedule v) { return word_of(lr_schedule_words(), v); }
std::string name_of(trace::Progress::Mode v) { return word_of(progress_words(), v); }

}  // namespace tandem::train
