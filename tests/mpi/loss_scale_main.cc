// Under mpirun -n 2 (2 stages) or -n 4 (2 stages x 2 replicas): with dynamic loss scaling, a step
// whose gradient overflows on the last rank alone (stage 1 of the last replica) is skipped on
// every rank: each rank's weights stay bitwise those of the step before, and every rank's scale
// halves. The next step trains everywhere. The model: tests/train/overflow_model.h. Exits 0 and
// prints "loss_scale_main: ok" on rank 0 when every rank's checks hold.
#include <cstdio>
#include <map>
#include <string>

#include "../train/overflow_model.h"
#include "tandem/common/check.h"
#include "tandem/train/job.h"
#include "tandem/train/trainer.h"

int main() {
  using namespace tandem;
  train::Config c;
  c.model = "overflow";
  c.data = "overflow-points";
  c.balance = {1, 2};
  c.batch = 8;
  c.microbatches = 2;
  c.steps = 4;
  c.lr = 0.05;
  c.loss_scaling = train::LossScaling::kDynamic;
  c.progress = trace::Progress::Mode::kNone;
  train::Job job(c);
  c.replicas = job.world() / 2;
  job.agree(c);
  return job.guard([&] {
    TANDEM_CHECK(job.mpi() && (job.world() == 2 || job.world() == 4),
                 "run under mpirun -n 2 or -n 4, not {} rank(s)", job.world());
    auto t = job.trainer(c, testing::overflow_model(), std::make_unique<testing::OverflowSource>());
    const runtime::StepStats first = t->train_step(0);
    TANDEM_CHECK(!first.skipped, "rank {}: a clean step was skipped", job.rank());
    const auto before = testing::weights_of(*t);
    TANDEM_CHECK(!before.empty(), "rank {} holds no weights", job.rank());
    testing::overflow_switch() = job.rank() == job.world() - 1;
    const runtime::StepStats bad = t->train_step(1);
    testing::overflow_switch() = false;
    TANDEM_CHECK(bad.skipped, "rank {}: the step that overflowed on rank {} was not skipped here",
                 job.rank(), job.world() - 1);
    TANDEM_CHECK(testing::same_bits(testing::weights_of(*t), before),
                 "rank {}: the skipped step changed this rank's weights", job.rank());
    TANDEM_CHECK(t->loss_scaler()->scale() == 32768.0 && t->loss_scaler()->skipped_steps() == 1,
                 "rank {}: scale {} after {} skipped steps, not 32768 after 1", job.rank(),
                 t->loss_scaler()->scale(), t->loss_scaler()->skipped_steps());
    const runtime::StepStats next = t->train_step(2);
    TANDEM_CHECK(!next.skipped && !testing::same_bits(testing::weights_of(*t), before),
                 "rank {}: the clean step after the skipped one did not train", job.rank());
    job.barrier();
    if (job.rank() == 0) std::printf("loss_scale_main: ok\n");
  });
}
