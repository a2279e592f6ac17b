#!/usr/bin/env bash
# Writes bench/MEMORY.md: the largest volume under a 192 MiB budget per device, for one
# micro-batch and for four under 1F1B (bench/memory.sh), with how to read the tables.
# Usage: bench/memory-report.sh BUILD_DIR
set -euo pipefail
build=${1:-build}
cd "$(dirname "$0")/.."
out=bench/MEMORY.md
{
  echo "# Largest volume under a memory budget"
  echo
  echo "Written by \`make bench-memory\` (bench/memory-report.sh) on $(date -u +%Y-%m-%d). Byte counts"
  echo "come from tandem's allocator accounting, not from timing, so they do not depend on the"
  echo "machine's load. CPU devices, LibTorch $(dpkg-query -W -f='${Version}' libtorch-dev 2>/dev/null || echo unknown)."
  echo
  echo "## One micro-batch of 2 samples (the model-parallel case: the batch does not fit one device)"
  echo
  echo "Command: \`bench/memory.sh $build 192MiB 1 2\`"
  echo
  bash bench/memory.sh "$build" 192MiB 1 2
  echo
  echo "## Four micro-batches of 2 samples under 1F1B (pipelining)"
  echo
  echo "Command: \`bench/memory.sh $build 192MiB 4 8\`"
  echo
  bash bench/memory.sh "$build" 192MiB 4 8
  echo
  echo "## Every sample cut into depth slabs (\`--spatial N\`)"
  echo
  echo "Command: \`bench/memory-spatial.sh $build 192MiB 48 1\` (one training step per try)"
  echo
  bash bench/memory-spatial.sh "$build" 192MiB 48 1
  echo
  echo "### The same with two training steps per try (the optimizer's state held too)"
  echo
  echo "Command: \`bench/memory-spatial.sh $build 192MiB 48 2\`"
  echo
  bash bench/memory-spatial.sh "$build" 192MiB 48 2
  echo
  echo "## The memory plan's prediction against the measured peak (\`--partition memory\`)"
  echo
  echo "Command: \`bench/memory-plan.sh $build\`"
  echo
  bash bench/memory-plan.sh "$build"
  echo
  echo "## The memory plan for a user's ONNX model"
  echo
  echo "Command: \`bench/memory-onnx.sh $build\`"
  echo
  bash bench/memory-onnx.sh "$build"
  echo
  echo "## Whole scans predicted (\`tandem predict\`): forward only, no activations kept"
  echo
  echo "Command: \`bench/memory-predict.sh $build 192MiB 1 2 4\`"
  echo
  bash bench/memory-predict.sh "$build" 192MiB 1 2 4
  echo
  echo "\"planned at it\": the forward's plan for the device that holds the most (the \`planned_peak=\` of"
  echo "the result line), made before the forward runs; a scan whose plan exceeds the budget is refused"
  echo "with status 3 before any work, so \"over the budget\" here is the plan's verdict."
  echo
  cat <<'NOTES'
## Reading these tables

- Splitting layers raises the largest volume only a little: conv3d-stack from 72³ on 1 device
  to 80³ on 4 (one micro-batch), unet3d from 64³ to 72³ on 2 and 4 devices with the memory
  split. Each device's peak is dominated by its full-resolution layers: the activations of one
  such layer and the workspace its convolution holds for a moment (the oneDNN kernels' scratch
  space and the gradients its backward makes). No layer split divides one layer, so the
  device that holds a full-resolution layer needs that workspace whatever the partition.
- `--spatial N` divides every layer instead: a slab keeps what one device keeps of the same
  voxels, once (a convolution keeps its input, never a copy with the halos; the halo planes
  come again from the neighbours for the weight gradient; the decoder convolves the up-sampled
  tensor and the skip as two parts, never a concatenated copy), and its convolutions run in
  chunks of planes, so no workspace is the whole slab's. Under the budget device 0 holds
  0.98-0.99x one device's bytes per voxel at 2, 4 and 8 slabs, and the largest volume grows
  with the devices: 88³ on 2 (2.60x the voxels of one), 104³ on 4 (4.29x), 128³ on 8 (8.00x),
  with one micro-batch and with four, for the first step and with the optimizer's state held
  (two steps). At 64³ without a budget, 8 slabs of 8 planes hold 1.14-1.18x per voxel: there
  the halo planes and the chunks' pieces weigh. With stages and slabs together device 0 holds
  only its stages' layers (0.68x one device's bytes per voxel with one micro-batch); the last
  stage's group decides the volume: 88³ on 2 stages of 2 slabs (2.60x), 112³ on 2 stages of 4
  (5.36x); with four micro-batches 80³ and 104³.
- The convolutions of a slab run in chunks of at most half the pass's result each (kChunkShare
  in src/spatial/halo_conv.cc), about an eighth of the slab's planes. A share of 1 holds the
  same at 64³ on 2 slabs and trains 1.2x faster there, but stops 2 slabs at 80³ instead of 88³
  under this budget (bench/RESULTS.md, "what the chunks cost").
- `tandem predict` keeps no activations for a backward: a stage drops each tensor after its
  last reader, and forward only, a whole sample's convolutions, skip concatenations and
  up-sampling run in chunks of about an eighth of the planes (src/models/split_conv.h); on a
  slab each convolution exchanges its halos and runs in chunks of two planes or more into one
  output, the skip concatenation's parts filled into one piece per chunk (spatial::
  halo_conv_forward), so a slab holds about what one device holds per voxel (1.07x at 176³ on
  4 slabs). Under the same 192 MiB the U-Net predicts a whole 112³ scan on 1 device (5.36x the
  voxels it trains), 144³ on 2 slabs (2.13x one device; 4.38x the 88³ they train) and 176³ on 4
  (3.88x one device; 4.85x the 104³ they train).
- Under 1F1B, stage s keeps p - s micro-batches in flight: the first device stores as many
  micro-batches of its quarter as one device stores of the whole model one micro-batch at a
  time, so with four micro-batches 4 devices fit no larger a volume than 1 with a layer split
  (the known cost of 1F1B; GPipe would hold all of them). Slabs of one stage keep one
  micro-batch in flight, so four micro-batches change nothing there.
- `--recompute stage` keeps only stage inputs per micro-batch in flight. It lowers the first
  stages' peaks (unet3d, 4 devices, 1F1B, four micro-batches: device 0 at 56³ from 187 to 90
  MiB) but the workspace of the layer being recomputed stays, so the largest volume moves by
  one step at most.
- `--partition memory` predicts each stage's peak from one measured micro-batch and picks
  the split with the smallest largest prediction. The running micro-batch is followed layer
  by layer through its backward: the later layers' tensors are freed, the tensors the stage
  sent stay until its backward ends, a skip's gradient waits for its producer, and the
  gradient messages for what it sent (one per stage that read it, and their sum) are held
  throughout. The planned peak adds the messages a stage has received but not used at one of
  its backwards, where the lowered schedule orders a recv first: under 1F1B with four
  micro-batches on 4 devices, the next input on stages 1 and 2; on the U-Net, skips from
  stage 0 on the last stage and a skip's gradient on stage 0. Measured against planned (the
  table above): 0.84-1.00; no stage exceeds it. Before these were counted, stages ran up to
  13% above the prediction (conv3d-stack 64³, 4 devices, 1F1B, four micro-batches, stage 1:
  208.0 MiB measured against 192.1 predicted). With `--recompute stage` and several
  micro-batches in flight a stage also holds what it sent of one micro-batch until the next
  stage takes it (that stage 0 with recomputation: 72.0 MiB measured, 56.4 planned without it,
  72.4 with it); the largest-volume rows with `--partition memory --recompute stage` above were
  searched before that term, which can change the split they get.
- Each layer is measured as a pipeline runs it: its forward's workspace (outputs that no
  autograd graph keeps included), its backward's with the gradient that reaches its outputs,
  and again with its outputs kept where the stage sends them. For a PyTorch U-Net exported to
  ONNX (the last table) the plan had said 177.7 MiB for a measured 255 MiB on one device; a
  stage now also drops each tensor after its last reader, and the plan holds the measured
  peaks from above, within 10%, on one device, 2 and 4 slabs and 2 stages.
- "At most" adds the gradients a stage sent that the stage before has not taken yet, which
  only happens when that stage runs late: on a loaded machine stage 3 of the test
  `MemoryPlan.CountsTheMessagesAStageHoldsInABackward` measured one gradient above its
  planned peak. It is the most any timing of the schedule allows (stage 1 of 4 under 1F1B:
  three gradients); a `--device-memory` budget at "at most" cannot be exceeded by timing.
  The partition is searched by the planned peak: searching by "at most" chose a U-Net split
  whose measured largest peak was 187.6 MiB instead of 160.8.
NOTES
} > "$out.new"
mv "$out.new" "$out"
echo "bench: wrote $out"
