#include "tandem/train/config.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace tandem::train {
namespace {

// "dataset" or "dataset:mean,...;deviation,..." with the moments given, in full precision.
std::string normalize_text(const data::Normalization& n) {
  std::string text = data::normalize_name(n.mode);
  if (n.head) text += ":head";
  if (n.in_float32) text += ":float32";
  if (!n.mean.empty())
    text += fmt::format(":{};{}", fmt::join(n.mean, ","), fmt::join(n.deviation, ","));
  return text;
}

}  // namespace

std::string describe(const Config& c) {
  return fmt::format(
      "model={} loss={} output={} width={} blocks={} dropout={} convs={} filters={} levels={} "
      "volume={} bce={} data={} data_dir={} normalize={} devices={} devices_given={} "
      "threads_per_device={} "
      "lend_idle_cores={} balance={} partition={} stages={} spatial={} replicas={} schedule={} "
      "microbatches={} virtual_stages={} recompute={} transport={} mpi_cuda={} "
      "comm_timeout_s={} log_placement={} faults={} progress={} batch={} epochs={} steps={} "
      "optimizer={} "
      "lr={} lr_schedule={} momentum={} seed={} eval_batch={} train_samples={} test_samples={} "
      "test_files={} classes={} device_memory={} save_dir={} save_every={} keep={} overwrite={} "
      "resume={} init_from={} eval_only={} plan_only={}",
      c.model, c.loss, c.output, c.width, c.blocks, c.dropout, c.convs, c.filters, c.levels,
      c.volume, c.bce, c.data,
      // Paths that may differ by node: whether one is given.
      !c.data_dir.empty(), normalize_text(c.normalize), c.devices, c.devices_given,
      c.threads_per_device, c.lend_idle_cores, fmt::join(c.balance, ","), c.partition, c.stages,
      c.spatial, c.replicas, c.schedule, c.microbatches, c.virtual_stages, c.recompute, c.transport,
      c.mpi_cuda, c.comm_timeout_s, c.log_placement, fmt::join(c.faults, ";"), c.progress, c.batch,
      c.epochs, c.steps, c.optimizer, c.lr, c.lr_schedule, c.momentum, c.seed, c.eval_batch,
      c.train_samples, c.test_samples, c.test_files, c.classes, c.device_memory,
      // Collective parts of the run (checkpoints, loading); their paths may differ by node.
      !c.save_dir.empty(), c.save_every, c.keep, c.overwrite, !c.resume.empty(),
      !c.init_from.empty(), c.eval_only, c.plan_only);
}

}  // namespace tandem::train
