#include "tandem/train/config.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace tandem::train {

std::string describe(const Config& c) {
  return fmt::format(
      "model={} width={} blocks={} dropout={} data={} devices={} balance={} stages={} "
      "replicas={} schedule={} microbatches={} virtual_stages={} recompute={} batch={} epochs={} "
      "steps={} optimizer={} lr={} momentum={} seed={}",
      c.model, c.width, c.blocks, c.dropout, c.data, c.devices, fmt::join(c.balance, ","), c.stages,
      c.replicas, c.schedule, c.microbatches, c.virtual_stages, c.recompute, c.batch, c.epochs,
      c.steps, c.optimizer, c.lr, c.momentum, c.seed);
}

}  // namespace tandem::train
