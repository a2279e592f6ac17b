// tandem verify: one's own split checked against one device (train/verify.h).
#include <algorithm>
#include <iostream>
#include <numeric>

#include "commands.h"
#include "run_options.h"
#include "session.h"
#include "tandem/memory/out_of_memory.h"
#include "tandem/train/verify.h"

namespace tandem::cli {

namespace {

struct VerifyArgs {
  RunArgs run;
  int64_t steps = 1;
};

// The parameters whose copy this process holds for the job: the stages it leads (the first slab
// of their group, where the slabs' gradients meet), in replica 0.
std::vector<std::pair<std::string, torch::Tensor>> held_parameters(const train::Trainer& t) {
  std::vector<std::pair<std::string, torch::Tensor>> named;
  if (t.replica() != 0) return named;
  for (int stage : t.pipeline().local_stages()) {
    if (t.pipeline().lead_device(stage) < 0) continue;
    for (auto& p : t.pipeline().stage_named_parameters(stage)) named.push_back(p);
  }
  return named;
}

// Elements of one sample's input.
int64_t sample_elements(const train::Source& source) {
  const std::vector<int64_t> shape = source.input_shape();
  return std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<int64_t>());
}

std::string does_not_fit(const train::Config& reference, const std::string& why) {
  return fmt::format(
      "the one-device reference (the whole batch of {} samples on one CPU device in this "
      "process) does not fit: {}; verify the same split on a smaller --batch (with --steps N to "
      "compare N steps' weights too)",
      reference.batch, why);
}

// The one-device run of `reference` for `steps` steps: the first step's gradients and loss, the
// weights after the last step. A reference over the memory ends with status 3, saying so; any
// other error is the reference's own and stays as it is.
train::Findings run_reference(const train::Config& reference, int64_t steps) {
  train::Findings f;
  try {
    train::Trainer t(reference);
    const runtime::StepStats first = t.train_step(0);
    f.gradients = train::gradients_of(t.pipeline().named_parameters());
    f.has_loss = true;
    f.loss = first.loss;
    for (int64_t k = 1; k < steps; ++k) t.train_step(k);
    f.weights = train::values_of(t.pipeline().named_parameters());
  } catch (const memory::OutOfMemory& e) {
    throw memory::DoesNotFit(does_not_fit(reference, e.what()));
  } catch (const memory::DoesNotFit& e) {
    throw memory::DoesNotFit(does_not_fit(reference, e.what()));
  } catch (const std::bad_alloc&) {
    throw memory::DoesNotFit(does_not_fit(reference, "the allocator refused a request"));
  }
  return f;
}

int run_verify(VerifyArgs& args) {
  train::Config& c = args.run.config;
  c.steps = args.steps;
  c.log_placement = true;  // where each layer ran, recorded while it ran
  c.progress = trace::Progress::Mode::kNone;
  // The reference is made from the options as given, not as the job places them (under MPI:
  // one device per rank).
  const train::Config reference = train::reference_config(c);
  Session session;
  if (const int status = start_session(args.run, session)) return status;
  return run_guarded(session, [&] {
    train::Trainer& trainer = *session.trainer;
    train::Job& job = *session.job;
    print_start(session);
    train::Findings mine;
    const runtime::StepStats first = trainer.train_step(0);
    mine.gradients = train::gradients_of(held_parameters(trainer));
    mine.has_loss = session.main_process();
    mine.loss = first.loss;
    const std::string where = job.mpi() ? fmt::format("r{} ", job.rank()) : std::string();
    mine.places = train::places_of(*trainer.pipeline().placement_log(), where);
    for (int64_t k = 1; k < args.steps; ++k) trainer.train_step(k);
    if (args.steps > 1) mine.weights = train::values_of(held_parameters(trainer));
    const std::vector<std::string> found = job.gather(mine.pack());  // collective
    if (job.rank() != 0) return 0;
    train::Findings split;
    for (const std::string& text : found) split.merge(train::Findings::unpack(text));
    const train::Findings ref = run_reference(reference, args.steps);
    // The same one-device run with its sums in another order (the batch in 2 micro-batches):
    // each parameter's own rounding.
    train::Config halves = reference;
    halves.microbatches = std::min(2, reference.batch);
    const train::Findings reordered = run_reference(halves, args.steps);

    const runtime::Pipeline& p = trainer.pipeline();
    const int64_t samples = reference.batch, elements = sample_elements(trainer.source());
    const train::Tolerance tol = train::gradient_tolerance(torch::kFloat32, samples, elements);
    const train::Comparison grads =
        train::compare(p.model(), p.partition(), split.gradients, ref.gradients, split.places, tol,
                       halves.microbatches > 1 ? &reordered.gradients : nullptr);
    std::cout << fmt::format(
        "gradients of step 1 against one device on the whole batch of {} samples; tolerance {}, "
        "or 16 times a parameter's own rounding (one device, the batch whole against in 2 "
        "micro-batches) where that is more:\n",
        samples, tol.describe(samples, elements));
    std::cout << grads.table("gradient");
    std::cout << fmt::format("loss of step 1: {:.8g} split, {:.8g} on one device\n", split.loss,
                             ref.loss);
    bool ok = grads.ok();
    const train::ParameterCheck* failure = grads.first_failure();
    double largest = 0;
    for (const auto& q : grads.parameters) largest = std::max(largest, q.difference);
    if (args.steps > 1) {
      const train::Tolerance wtol =
          train::gradient_tolerance(torch::kFloat32, samples, elements, args.steps);
      const train::Comparison weights =
          train::compare(p.model(), p.partition(), split.weights, ref.weights, split.places, wtol,
                         halves.microbatches > 1 ? &reordered.weights : nullptr);
      std::cout << fmt::format("weights after {} steps; tolerance {}:\n", args.steps,
                               wtol.describe(samples, elements));
      std::cout << weights.table("weight");
      if (ok && !weights.ok()) failure = weights.first_failure();
      ok = ok && weights.ok();
    }
    if (!split.replicas_differ.empty()) {
      std::cout << fmt::format(
          "result: differs first={} replicas=disagree: two replicas of its stage hold other "
          "values after the all-reduce ({} parameter{})\n",
          split.replicas_differ.front(), split.replicas_differ.size(),
          split.replicas_differ.size() == 1 ? "" : "s");
      return kExitFailure;
    }
    if (ok) {
      std::cout << fmt::format(
          "result: verified parameters={} steps={} largest_difference={:.2e} tolerance={:.2e} "
          "loss={:.6g} reference_loss={:.6g}\n",
          grads.parameters.size(), args.steps, largest, tol.value, split.loss, ref.loss);
      return 0;
    }
    std::cout << fmt::format(
        "result: differs first={} layer={} stage={} difference={:.2e} allowed={:.2e} "
        "loss={:.6g} reference_loss={:.6g}\n",
        failure->name, failure->layer, failure->stage, failure->difference, failure->allowed,
        split.loss, ref.loss);
    return kExitFailure;
  });
}

}  // namespace

Runner add_verify(CLI::App& app) {
  auto args = std::make_shared<VerifyArgs>();
  CLI::App* cmd = app.add_subcommand(
      "verify",
      "Check a split against one device: one training step of the given placement, schedule, "
      "slabs and replicas and the same step on one CPU device on the whole batch, from the same "
      "weights; one row per parameter with the devices its layer's forward and backward ran "
      "on, the gradients' norms and difference, and a verdict. Status 0: every parameter "
      "agrees; 1: one does not.");
  using G = train::OptionGroup;
  for (G group : {G::kModel, G::kData, G::kPlacement, G::kRecompute, G::kBatch, G::kOptimizer})
    add_option_group(*cmd, args->run, group);
  cmd->add_option("--steps", args->steps,
                  "steps to run; with more than 1 the weights after the last are compared too")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1000}));
  add_option_group(*cmd, args->run, G::kVerify);
  add_config_option(*cmd, args->run, "init_from", "",
                    "start both runs from a state dict or checkpoint (default: the seed's "
                    "initialization, or an ONNX model's own weights)");
  return [args]() { return run_verify(*args); };
}

}  // namespace tandem::cli
