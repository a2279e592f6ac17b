#include "tandem/train/config.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace tandem::train {

std::string describe(const Config& c) {
  return fmt::format(
      "model={} width={} blocks={} dropout={} convs={} filters={} levels={} volume={} bce={} "
      "data={} devices={} balance={} partition={} stages={} "
      "replicas={} schedule={} microbatches={} virtual_stages={} recompute={} batch={} epochs={} "
      "steps={} optimizer={} lr={} lr_schedule={} momentum={} seed={}",
      c.model, c.width, c.blocks, c.dropout, c.convs, c.filters, c.levels, c.volume, c.bce, c.data, c.devices, fmt::join(c.balance, ","), c.partition, c.stages,
      c.replicas, c.schedule, c.microbatches, c.virtual_stages, c.recompute, c.batch, c.epochs,
      c.steps, c.optimizer, c.lr, c.lr_schedule, c.momentum, c.seed);
}

}  // namespace tandem::train
