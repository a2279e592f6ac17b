// Under mpirun -n 2: a trainer made in process is refused (each rank would believe it is rank 0
// of 1 and race the others on the same checkpoint folder), and one made on the job saves whole
// checkpoints that a second trainer on the job resumes; a run on slabs needs the job laid out
// for them (Job::relayout). Usage: job_main SAVE_DIR. Exits 0 when
// every rank's checks hold.
#include <cstdio>
#include <filesystem>
#include <string>

#include "tandem/checkpoint/load.h"
#include "tandem/common/check.h"
#include "tandem/train/job.h"

int main(int argc, char** argv) {
  using namespace tandem;
  TANDEM_CHECK(argc == 2, "usage: job_main SAVE_DIR");
  const std::string dir = argv[1];
  train::Config c;
  c.model = "conv3d-stack";
  c.data = "regression";
  c.convs = 2;
  c.filters = 2;
  c.volume = 8;
  c.batch = 2;
  c.microbatches = 2;
  c.train_samples = 8;
  c.test_samples = 0;
  c.steps = 3;
  c.save_dir = dir;
  c.save_every = 1;
  train::Job job(c);
  job.agree(c);
  return job.guard([&] {
    TANDEM_CHECK(job.mpi() && job.world() == 2, "run under mpirun -n 2, not {} rank(s)",
                 job.world());
    std::string refused;
    try {
      train::Trainer alone(c);
    } catch (const Error& e) {
      refused = e.what();
    }
    TANDEM_CHECK(refused.find("make the trainer on the job") != std::string::npos,
                 "a trainer made in process under mpirun was not refused: '{}'", refused);
    if (job.rank() == 0) std::filesystem::remove_all(dir);
    job.barrier();
    const train::Result first = job.trainer(c)->run();
    TANDEM_CHECK(first.steps == 3, "trained {} steps, not 3", first.steps);
    job.barrier();
    // Every rank sees the three checkpoints whole: each written once, by the job.
    const std::vector<std::string> held = checkpoint::list_checkpoints(dir);
    TANDEM_CHECK(held.size() == 3, "{} checkpoints in {}, not 3", held.size(), dir);
    train::Config more = c;
    more.steps = 4;
    more.resume = dir;
    const train::Result resumed = job.trainer(more)->run();
    TANDEM_CHECK(resumed.steps == 4, "the resumed run ended at step {}, not 4", resumed.steps);
    // Slabs on 2 ranks need a transport laid out for them: refused on the job as made (its sums
    // would cross the wrong ranks), trained once the job is laid out again.
    train::Config slabs = c;
    slabs.spatial = 2;
    slabs.stages = 1;
    slabs.save_dir.clear();
    slabs.save_every = 0;
    std::string wrong;
    try {
      job.trainer(slabs);
    } catch (const Error& e) {
      wrong = e.what();
    }
    TANDEM_CHECK(wrong.find("laid out for --spatial 1, not 2") != std::string::npos,
                 "slabs on a transport without slab groups were not refused: '{}'", wrong);
    job.relayout(slabs);
    const train::Result sliced = job.trainer(slabs)->run();
    TANDEM_CHECK(sliced.steps == 3, "the run on slabs trained {} steps, not 3", sliced.steps);
    if (job.rank() == 0) std::printf("job_main: ok\n");
  });
}
