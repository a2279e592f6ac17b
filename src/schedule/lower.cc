#include "schedule/lower.h"

#include <algorithm>
#include <tuple>
#include <unordered_map>

#include "schedule/index.h"
#include "tandem/common/check.h"
#include "tandem/schedule/validate.h"

namespace tandem::schedule {
namespace {

// One entry of a device's merged list, ordered by `key`.
struct Item {
  // (time, 0 for a message / 1 for a compute, then the message's identity or the compute's
  // list position).
  std::tuple<double, int, int, int, int, int> key;
  Action action;
};

// Moves every send up to just after its producer and every recv down to just before its
// consumer, but never past another send or recv: each device meets its messages in the same
// order as before (so the order stays deadlock-free), and with buffered sends no action can
// start later than before (sends go out sooner, and a recv no longer holds up computes that do
// not need it).
void tighten(std::vector<Action>* list) {
  std::vector<Action>& row = *list;
  for (std::size_t i = row.size(); i-- > 0;) {
    if (row[i].kind != Kind::kRecv) continue;
    const Action consumer = compute_of(row[i]);
    for (std::size_t j = i;
         j + 1 < row.size() && row[j + 1].kind == Kind::kCompute && row[j + 1] != consumer; ++j) {
      std::swap(row[j], row[j + 1]);
    }
  }
  for (std::size_t i = 0; i < row.size(); ++i) {
    if (row[i].kind != Kind::kSend) continue;
    const Action producer = compute_of(row[i]);
    for (std::size_t j = i; j > 0 && row[j - 1].kind == Kind::kCompute && row[j - 1] != producer;
         --j) {
      std::swap(row[j], row[j - 1]);
    }
  }
}

}  // namespace

Schedule lower(const Schedule& schedule, const StageGraph& graph) {
  return lower(schedule, graph, Costs::uniform(schedule.num_stages, 1, 2));
}

Schedule lower(const Schedule& schedule, const StageGraph& graph, const Costs& reference) {
  Schedule base = compute_only(schedule);
  const Timeline timeline = simulate(base, graph, reference);  // validates `base`
  for (const auto& row : base.device_actions) {
    for (const Action& a : row) {
      TANDEM_CHECK(cost_of(reference, a) > 0,
                   "lower() orders messages by a reference timeline whose compute costs must be "
                   "positive; {} costs {}.",
                   to_string(a), cost_of(reference, a));
    }
  }
  std::unordered_map<Action, const TimedAction*, ActionHash> timed;
  for (const TimedAction& t : timeline.actions) timed[t.action] = &t;

  const ScheduleIndex index(base, graph);
  std::vector<std::vector<Item>> items(base.num_devices);
  for (int d = 0; d < base.num_devices; ++d) {
    const auto& row = base.device_actions[d];
    for (int i = 0; i < static_cast<int>(row.size()); ++i) {
      const Action& consumer = row[i];
      items[d].push_back(Item{{timed.at(consumer)->start, 1, i, 0, 0, 0}, consumer});
      for (const Action& producer : index.inputs(consumer)) {
        const int from = index.device_of(producer.stage);
        if (from == d) continue;
        const double t = timed.at(producer)->end;
        const auto key = std::make_tuple(t, 0, producer.stage, consumer.stage, consumer.microbatch,
                                         producer.op == Op::kForward ? 0 : 1);
        items[from].push_back(Item{key, send_action(producer, consumer.stage)});
        items[d].push_back(Item{key, recv_action(consumer, producer.stage)});
      }
    }
  }
  Schedule lowered = base;
  for (int d = 0; d < base.num_devices; ++d) {
    std::sort(items[d].begin(), items[d].end(),
              [](const Item& a, const Item& b) { return a.key < b.key; });
    lowered.device_actions[d].clear();
    for (const Item& item : items[d]) lowered.device_actions[d].push_back(item.action);
    tighten(&lowered.device_actions[d]);
  }
  try {
    validate(lowered, graph);
  } catch (const Error& e) {
    TANDEM_ASSERT(false, "lower() produced an invalid schedule: {}", e.what());
  }
  return lowered;
}

}  // namespace tandem::schedule
