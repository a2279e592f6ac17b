// The pieces of a stage's predicted memory (stage_memory.h).
#include "runtime/stage_memory.h"

#include <algorithm>
#include <map>
#include <set>

#include "schedule/held_messages.h"
#include "tandem/common/check.h"
#include "tandem/schedule/stage_graph.h"

namespace tandem::runtime {

double forward_flops(const graph::Model& model, int begin, int end) {
  double flops = 0;
  for (int i = begin; i < end; ++i) flops += model.layers[i].forward_flops_per_sample;
  return flops;
}

double loss_scalars(const schedule::Schedule* lowered, int in_flight) {
  return 3 * 4.0 * (lowered ? lowered->num_microbatches : in_flight);
}

int loss_stage(const TensorUses& u, const graph::Partition& partition) {
  const int made = u.output >= 0 ? u.producer[static_cast<size_t>(u.output)] : -1;
  return made >= 0 ? partition.stage_of_layer[static_cast<size_t>(made)] : partition.num_stages - 1;
}

TensorUses index_tensors(const graph::Model& model, const LayerBytes& bytes) {
  TensorUses u;
  std::map<std::string, int> ids;
  auto id = [&](const std::string& name) {
    auto [it, added] = ids.emplace(name, static_cast<int>(u.producer.size()));
    if (added) {
      u.producer.push_back(-1);
      u.readers.emplace_back();
      u.bytes.push_back(static_cast<double>(bytes.tensors.at(name)));
      u.unkept.push_back(0);
    }
    return it->second;
  };
  id(model.input);
  u.touched.resize(model.layers.size());
  for (size_t i = 0; i < model.layers.size(); ++i) {
    const int layer = static_cast<int>(i);
    for (const auto& name : model.layers[i].inputs) {
      const int t = id(name);
      if (u.readers[t].empty() || u.readers[t].back() != layer) u.readers[t].push_back(layer);
      u.touched[i].push_back(t);
    }
    for (const auto& name : model.layers[i].outputs) {
      const int t = id(name);
      u.producer[t] = layer;
      u.touched[i].push_back(t);
    }
  }
  u.output = id(model.output);
  for (const std::string& name : bytes.unkept) {
    const auto it = ids.find(name);
    if (it != ids.end()) u.unkept[static_cast<size_t>(it->second)] = 1;
  }
  return u;
}

bool splits_backward(const schedule::Schedule* schedule) {
  if (!schedule) return false;
  for (const auto& actions : schedule->device_actions)
    for (const schedule::Action& a : actions)
      if (a.kind == schedule::Kind::kCompute && a.op == schedule::Op::kInput) return true;
  return false;
}

StageParts stage_parts(const TensorUses& u, const LayerBytes& bytes, int begin, int end,
                       bool recompute, const graph::Partition* partition, bool split_backward) {
  StageParts out;
  // Under a split backward the I half leaves each layer's deferred W work behind it: at layer
  // i's backward, what the later layers' work keeps is held too (deferred_after[i - begin]).
  std::vector<double> deferred_after(end - begin + 1, 0);
  if (split_backward && !bytes.deferred.empty())
    for (int i = end - 1; i > begin; --i)
      deferred_after[i - 1 - begin] =
          deferred_after[i - begin] + static_cast<double>(bytes.deferred[i]);
  const double deferred_total = split_backward && !bytes.deferred.empty() && end > begin
                                    ? deferred_after[0] + static_cast<double>(bytes.deferred[begin])
                                    : 0.0;
  // Of what a later layer's deferred work keeps, what layer i's backward holds anyway: its
  // inputs made at or before layer i (activations still alive, or received tensors). The work's
  // bytes beyond its outputs' (the gradient it keeps) are its inputs. The gradient is its own:
  // the one its layer's first node made (a ReLU's), not a message the stage holds.
  // already[i - begin] changes by already_delta[i - begin] from layer i on.
  std::vector<double> already_delta(end - begin + 1, 0);
  for (int j = begin + 1; deferred_total > 0 && j < end; ++j) {
    const double kept_by_work = static_cast<double>(bytes.deferred[j]);
    if (kept_by_work <= 0) continue;
    double outputs = 0;
    for (const int t : u.touched[j])
      if (u.producer[t] == j) outputs += u.bytes[t];
    double inputs_left = std::max(0.0, kept_by_work - outputs);
    for (const int t : u.touched[j]) {
      const int made = u.producer[t];
      if (made >= j) continue;
      const double b = std::min(u.bytes[t], inputs_left);
      inputs_left -= b;
      already_delta[std::max(made, begin) - begin] += b;
      already_delta[j - begin] -= b;
    }
  }
  // The micro-batch that runs holds, at layer i's backward: what layers begin..i left alive (a
  // backward frees the later layers' tensors first: autograd runs nodes in reverse creation
  // order); the tensors it sent, which later layers made (kept until its backward ends); the
  // gradients of tensors made before layer i that a later layer of the stage reads (a skip's
  // gradient waits for its producer); layer i's backward workspace, with the gradients that
  // reach its outputs; and the gradients of what it sent. The largest such sum, or of a layer's
  // forward, less all of the micro-batch's activations, is the stage's workspace.
  // held[i - begin] changes by delta[i - begin] from layer i on.
  std::vector<double> delta(end - begin + 1, 0);
  auto hold = [&](int from, int to, double b) {  // held at layers [from, to]
    from = std::max(from, begin);
    to = std::min(to, end - 1);
    if (from > to) return;
    delta[from - begin] += b;
    delta[to + 1 - begin] -= b;
  };
  double received = 0, sent = 0, sent_on = 0, sent_unkept = 0;
  bool loss_here = false;
  std::vector<char> seen(u.producer.size(), 0);
  // Layers whose outputs the stage keeps through its backward (it sent them): their backward
  // frees none of them.
  std::vector<char> outputs_kept(end - begin, 0);
  for (int i = begin; i < end; ++i) {
    for (const int t : u.touched[i]) {
      if (seen[t]) continue;
      seen[t] = 1;
      const int made = u.producer[t];
      const auto& readers = u.readers[t];
      const auto after = std::lower_bound(readers.begin(), readers.end(), end);
      // Its gradient waits from after the layer that makes it (or from the stage's start, for
      // what the stage receives) until the stage's last layer that reads it runs backward.
      if (after != readers.begin() && *std::prev(after) > made)
        hold(made + 1, *std::prev(after) - 1, u.bytes[t]);
      if (made < begin) {
        received += u.bytes[t];  // its own copy per micro-batch in flight
        continue;
      }
      if (after == readers.end() && t != u.output) continue;
      // The model's output, which the loss on this stage reads, is planned as a tensor sent on:
      // held with its gradient. The loss keeps it (or its fp32 copy, counted below) until the
      // loss's backward, and the gradient it hands back is made as the last layer's backward
      // starts; counted throughout, a bound from above that covers what timing may leave
      // (a split backward's loss stage measured 16 KiB above the plan without it, under load).
      loss_here = loss_here || after == readers.end();
      // Sent on. During its backward the stage holds every gradient message for it, one per
      // later stage that reads it (without the partition, while partitions are searched, one
      // per later layer: a bound from above), and from two messages on their sum
      // (Executor::backward). A layer of the stage that reads it too adds its part to that sum
      // in autograd's buffer: a new tensor when the last such layer's backward hands its part
      // over, which replaces that part (counted above as a skip's gradient) and is used by the
      // producer's backward (whose incoming gradient its transient counts). A tensor no later
      // layer reads is the output: its gradient comes from the loss on this stage.
      std::set<int> senders;
      for (auto r = after; r != readers.end(); ++r)
        senders.insert(partition ? partition->stage_of_layer[*r] : *r);
      const int k = std::max<int>(1, static_cast<int>(senders.size()));
      sent += u.bytes[t] * (k + (k >= 2 ? 1 : 0));
      const auto inside = std::upper_bound(readers.begin(), after, made);
      if (inside != after) {
        const int last_inside = *std::prev(after);
        hold(last_inside, last_inside, u.bytes[t]);  // the part and the sum, for a moment
      }
      if (after != readers.end()) sent_on += u.bytes[t];
      // Sent on while no graph keeps it: the stage keeps it for its backward all the same, for
      // every micro-batch in flight (its producer's activations leave it out).
      if (after != readers.end() && u.unkept[static_cast<size_t>(t)]) sent_unkept += u.bytes[t];
      hold(begin, made - 1, u.bytes[t]);  // kept until the backward ends
      outputs_kept[made - begin] = 1;
    }
  }
  // The largest moment: a layer's forward (what the layers before it left, and its own
  // workspace; with recomputation it runs in the backward, beside the gradient messages), or
  // its backward (with what is held then and the gradient messages).
  // Under a split backward, a layer's input half (it holds the gradient it defers).
  const bool input_half = deferred_total > 0 &&
                          bytes.input_backward.size() == bytes.backward.size() &&
                          bytes.input_backward_held.size() == bytes.backward.size();
  double activations = 0, largest_at_a_layer = 0, largest_forward = 0, held = 0, already = 0;
  for (int i = begin; i < end; ++i) {
    activations += static_cast<double>(bytes.activations[i]);
    already += already_delta[i - begin];
    out.state += static_cast<double>(bytes.state[i]);
    if (static_cast<size_t>(i) < bytes.step.size())
      out.step = std::max(out.step, static_cast<double>(bytes.step[i]));
    held += delta[i - begin];
    const double forward =
        activations + static_cast<double>(bytes.forward[i]) + (recompute ? sent : 0.0);
    const uint64_t backward =
        input_half
            ? (outputs_kept[i - begin] ? bytes.input_backward_held[i] : bytes.input_backward[i])
            : (outputs_kept[i - begin] ? bytes.backward_held[i] : bytes.backward[i]);
    largest_forward = std::max(largest_forward, forward);
    largest_at_a_layer = std::max({largest_at_a_layer, forward,
                                   activations + held + static_cast<double>(backward) + sent +
                                       std::max(0.0, deferred_after[i - begin] - already)});
  }
  // Above the running micro-batch's kept tensors (what it sends on unkept is among them, and
  // the largest moment holds it too).
  const double kept_unkept = recompute ? 0.0 : sent_unkept;
  out.workspace = std::max(0.0, largest_at_a_layer - activations - kept_unkept);
  out.forward_workspace = std::max(0.0, largest_forward - activations - kept_unkept);
  out.received = received;
  out.sent_on = sent_on;
  // Kept per micro-batch in flight: its activations and what it received (with recomputation,
  // only what it received); under a split backward, between its I and W, what its deferred work
  // keeps instead (received tensors included), where that is more. The workspace stays what it
  // is above the activations: a W action holds every deferred micro-batch and its own workspace.
  out.kept = recompute ? received : activations + received + sent_unkept;
  // The stage with the loss holds each micro-batch's target, and the loss's fp32 copy of the
  // output where the output is of a reduced type (the copy replaces it) from the micro-batch's
  // loss to the start of its backward: the running micro-batch's moments (its forward before the
  // loss, its backward after) are without it, so the workspaces above the kept bytes are less by
  // it.
  if (loss_here) {
    out.kept += static_cast<double>(bytes.target);
    const double copy =
        recompute ? 0.0 : std::max(0.0, static_cast<double>(bytes.loss_input) - u.bytes[u.output]);
    out.kept += copy;
    out.workspace = std::max(0.0, out.workspace - copy);
    out.forward_workspace = std::max(0.0, out.forward_workspace - copy);
  }
  out.deferred = deferred_total;
  // A W action runs the layers' work in the order the I action queued it, the last layer's
  // first (autograd runs nodes in reverse creation order), and frees each once done: at layer
  // i's work the earlier layers' is still held.
  if (deferred_total > 0 && bytes.weight_workspace.size() == bytes.deferred.size()) {
    double most = 0;
    for (int i = begin; i < end; ++i) {
      if (bytes.deferred[i] == 0) continue;
      const double still_held = deferred_total - deferred_after[i - begin];
      most = std::max(most, still_held + static_cast<double>(bytes.weight_workspace[i]));
    }
    out.weight_workspace = std::max(0.0, most - deferred_total);
  } else if (deferred_total > 0) {
    out.weight_workspace = out.workspace;  // not measured: the backward's, a bound from above
  }
  out.per_microbatch = std::max(out.kept, deferred_total);
  if (!recompute) return out;
  out.recomputed = activations;
  out.in_transit = sent_on;
  return out;
}

Messages message_bytes(const graph::Model& model, const LayerBytes& bytes,
                       const graph::Partition& partition, bool recompute,
                       const schedule::Schedule* lowered) {
  Messages m;
  m.ahead.assign(partition.num_stages, 0);
  m.late.assign(partition.num_stages, 0);
  std::vector<double> halo_ahead(partition.num_stages, 0);
  for (int s = 0; s < partition.num_stages; ++s) {
    auto [begin, end] = partition.layers_of(s);
    for (int i = begin; i < end && i < static_cast<int>(bytes.halo.size()); ++i)
      halo_ahead[s] = std::max(halo_ahead[s], static_cast<double>(bytes.halo[i]));
  }
  if (!lowered) {
    m.late = halo_ahead;
    return m;
  }
  TANDEM_CHECK(lowered->num_stages == partition.num_stages,
               "the schedule has {} stages but the partition {}", lowered->num_stages,
               partition.num_stages);
  const graph::Flow flow = graph::analyze(model, partition);
  auto between = [&](const std::vector<graph::Crossing>& crossings, bool from, int peer) {
    double b = 0;
    for (const auto& c : crossings)
      if ((from ? c.from_stage : c.to_stage) == peer)
        b += static_cast<double>(bytes.tensors.at(c.tensor));
    return b;
  };
  m.ahead = schedule::peak_received_ahead(*lowered, [&](int stage, int from, schedule::Op op) {
    // An input has the bytes of what `from` sends; a gradient, of what is sent to `from`.
    return op == schedule::Op::kForward ? between(flow.inputs[stage], true, from)
                                        : between(flow.outputs[stage], false, from);
  });
  // A gradient it sends has the bytes of what it received from `peer`; an activation it sends
  // is held anyway until its backward, except with recomputation.
  const schedule::StageGraph graph{partition.num_stages, flow.consumers()};
  m.late =
      schedule::peak_sent_unreceived(*lowered, graph, [&](int stage, int peer, schedule::Op op) {
        if (op != schedule::Op::kForward) return between(flow.inputs[stage], true, peer);
        return recompute ? between(flow.outputs[stage], false, peer) : 0.0;
      });
  for (int s = 0; s < partition.num_stages; ++s) m.late[s] += halo_ahead[s];
  return m;
}

}  // namespace tandem::runtime
