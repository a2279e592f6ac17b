// Messages a stage holds besides its activations, read from the order of a lowered schedule
// (the memory plan adds their bytes to a stage's peak). Two kinds:
//   - received ahead: the input of a later micro-batch, or the gradient for another
//     micro-batch's backward, that a recv action took before one of the stage's backwards
//     (lower() orders a recv by its message, which can come first);
//   - sent, not yet received: a message the stage sent that may still wait for its recv at
//     one of its backwards. The tensor is the sender's until the receiver takes its copy.
// Both are counted at the stage's backward actions (B or I), where its peak is.
#pragma once

#include <functional>
#include <vector>

#include "tandem/schedule/schedule.h"
#include "tandem/schedule/stage_graph.h"

namespace tandem::schedule {

// Per stage: the most weight of messages it has received (its recv actions ran) but not used,
// at one of its backwards: inputs of forwards that have not run (op kForward), gradients for
// the backward of another micro-batch (op kBackward). A message of one micro-batch from stage
// `from` to stage `stage` weighs weight(stage, from, op) (its bytes; 1 counts messages). All 0
// for a schedule that is not lowered.
std::vector<double> peak_received_ahead(
    const Schedule& schedule, const std::function<double(int stage, int from, Op op)>& weight);

// Per stage: the most weight of messages it sent that may still wait for their recv at one of
// its backwards, under any timing the lowered schedule allows: a message counts when its recv
// does not happen before that backward (no chain of device orders and messages leads from the
// recv to it). weight(stage, peer, op): one message from `stage` to `peer`, op kForward for an
// activation and kBackward or kInput for a gradient (0 leaves a kind out). Throws
// tandem::Error for a schedule that cannot run to its end.
std::vector<double> peak_sent_unreceived(
    const Schedule& schedule, const StageGraph& graph,
    const std::function<double(int stage, int peer, Op op)>& weight);

}  // namespace tandem::schedule
