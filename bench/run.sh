#!/usr/bin/env bash
# Runs the benchmark programs and rewrites bench/RESULTS.md with the machine, the commands and
# their tables. Usage: bench/run.sh BUILD_DIR
set -euo pipefail
build=${1:-build}
cd "$(dirname "$0")/.."
out=bench/RESULTS.md
tmp=$(mktemp)
python=${PYTHON:-/usr/bin/python3}  # the interpreter with Debian's python3-torch
# glibc keeps freed memory in every process here, as tandem::keep_freed_memory() keeps it in
# tandem's: the Python baselines and the plain LibTorch loops get the same allocator as tandem.
export MALLOC_MMAP_THRESHOLD_=33554432 MALLOC_TRIM_THRESHOLD_=1099511627776 MALLOC_TOP_PAD_=268435456


# schedule_table DEVICES: the mlp under gpipe, 1f1b, interleaved (2 stages per device) and zb-h1
# on DEVICES devices, a Markdown table of samples/s and the measured and predicted bubble.
schedule_table() {
  echo "| schedule | samples/s | bubble measured | bubble predicted (simulator, measured costs) | target: within 5 points |"
  echo "|---|---|---|---|---|"
  local s extra line sps meas pred gap
  for s in gpipe 1f1b interleaved zb-h1; do
    extra=""
    [ "$s" = interleaved ] && extra="--virtual-stages 2"
    line=$($build/tandem train --model mlp --width 1024 --blocks 8 --data mnist --devices "$1" --microbatches 8 --batch 256 --steps 12 --optimizer adam --progress none --trace-steps 10 --report "$tmp" --schedule $s $extra | grep -E '^(report|result):' | tr '\n' ' ')
    sps=$(echo "$line" | sed -n 's/.*samples_per_s=\([0-9.]*\).*/\1/p')
    meas=$(echo "$line" | sed -n 's/.*bubble measured=\([0-9.]*\).*/\1/p')
    pred=$(echo "$line" | sed -n 's/.*predicted=\([0-9.]*\).*/\1/p')
    gap=$(awk -v a="$meas" -v b="$pred" 'BEGIN { d = a - b; if (d < 0) d = -d; printf "%.1f points, %s", 100 * d, d <= 0.05 ? "met" : "not met" }')
    echo "| $s | $sps | $meas | $pred | $gap |"
  done
}

blas=$(update-alternatives --query libblas.so.3-x86_64-linux-gnu 2>/dev/null | awk '/^Value:/ {print $2}')
{
  echo "# Benchmark results"
  echo
  echo "Written by \`make bench\` (bench/run.sh) on $(date -u +%Y-%m-%d). Medians of several runs, with"
  echo "min-max, and ratios against baselines measured in the same run. The machine is shared"
  echo "and noisy: compare ratios, not absolute numbers."
  echo
  echo "- CPU: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores available"
  echo "- BLAS: ${blas:-unknown}"
  echo "- LibTorch: $(dpkg-query -W -f='${Version}' libtorch-dev 2>/dev/null || echo unknown)"
  echo
  echo "## Core: tandem against a plain LibTorch loop and PyTorch's Pipe, the matrix-multiply ceiling, executor overhead"
  echo
  echo "The mlp (width 1024, 8 blocks, batch 256, Adam, synthetic MNIST-shaped data). Thread budget:"
  echo "the machine's cores. The plain loops and tandem's 1 stage use all of them; tandem's N stages"
  echo "divide them among N devices (at least 1 each), each keeping its share (\`--idle-cores keep\`,"
  echo "the default; the section \"Idle cores\" measures lending them); PyTorch's Pipe, which runs every CPU partition"
  echo "on one worker thread, gets all of them. Pipe is \`torch.distributed.pipeline.sync.Pipe\` from"
  echo "Debian's python3-torch $(dpkg-query -W -f='${Version}' python3-torch 2>/dev/null || echo '(version unknown)') (bench/pipe_baseline.py: chunks = micro-batches,"
  echo "checkpoint='never', CPU devices, the stages split by the same rule as tandem's). The Python"
  echo "runs and short samples of the matrix-multiply ceiling are taken in turn with tandem's runs, so"
  echo "that load from elsewhere falls on all of them alike. FLOPs: 3x the forward's multiply-adds."
  echo "Runs in this section and in the conv3d-stack section have \`OMP_WAIT_POLICY=passive\` (why: the"
  echo "next section)."
  echo
  core_cmd="$build/bench/bench_core --repeats 5 --steps 4 --python $python"
  echo "Command: \`OMP_WAIT_POLICY=passive $core_cmd\`"
  echo
  OMP_WAIT_POLICY=passive $core_cmd
  echo
  echo "## Idle cores: what bitwise reproducibility costs (mlp, 1f1b, batch 256)"
  echo
  echo "Each device of a process has its share of the cores (cores / devices) and keeps it by"
  echo "default (\`--idle-cores keep\`), also while it waits for a message, so at 1 micro-batch,"
  echo "where the stages compute one after another, each runs on one core of two. With"
  echo "\`--idle-cores lend\` a device that computes while others wait takes their cores: OpenBLAS's"
  echo "pool is sized to the cores divided among the devices computing when a device begins an"
  echo "action (src/common/core_share.cc), and OpenBLAS's pool threads spin 2^20 cycles instead of"
  echo "2^28 after a product before they sleep (\`OPENBLAS_THREAD_TIMEOUT\`, when set, decides"
  echo "instead). Lending is opt-in because the thread count of each product then follows the"
  echo "timing, and on some kernels so do its last bits (next section): the repeated runs of one"
  echo "command print different losses. The lend / keep column is the speed it trades for that."
  echo
  bash bench/idle-cores.sh "$build" 5
  echo
  echo "## Portable kernels: what the same bits on every machine cost (bench/portable.sh)"
  echo
  echo "By default every x86-64 machine with AVX2 computes with OpenBLAS's Haswell and ATen's AVX2"
  echo "kernels (\`--cpu-kernels portable\`; a machine whose OpenBLAS picked others starts tandem"
  echo "again, one more library load), and each device has one thread (\`--threads-per-device 1\`),"
  echo "so that the same command gives the same bits on any of them. The columns are the speed this"
  echo "trades against the kernels this machine's libraries pick (\`native\`, with the AVX-512"
  echo "kernels asked for as an AVX-512 machine would pick them) and against all the cores"
  echo "(\`--threads-per-device auto\`)."
  echo
  bash bench/portable.sh "$build" 5
  echo
  echo "## BLAS: which ways of computing a product keep its bits (bench_blas_split)"
  echo
  echo "Every product of a linear layer over a grid of shapes, computed with 2 BLAS threads and as"
  echo "single-threaded products over chunks of rows or columns, compared bit for bit with the"
  echo "same product on 1 thread in one call, under each OpenBLAS kernel family. A lending scheme"
  echo "could keep results bitwise only through a split that keeps every element's bits on every"
  echo "family; none does."
  echo
  for kernel in Haswell Zen SkylakeX Cooperlake; do
    echo "Command: \`OPENBLAS_CORETYPE=$kernel $build/bench/bench_blas_split\`"
    echo
    OPENBLAS_CORETYPE=$kernel "$build/bench/bench_blas_split"
    echo
  done
  echo "## Dropout masks keyed by sample (bench_dropout)"
  echo
  echo "A mask drawn per sample and element from Philox 4x32-10 (include/tandem/models/keyed_dropout.h)"
  echo "against LibTorch's CPU generator (\`bernoulli_\`, how masks were drawn per micro-batch before),"
  echo "for the tensors the built-in models drop, with the convolution that produces the U-Net's"
  echo "bottom tensor for scale."
  echo
  drop_cmd="$build/bench/bench_dropout --threads 1,2 --repeats 5 --iters 5"
  echo "Command: \`OMP_WAIT_POLICY=passive $drop_cmd\`"
  echo
  OMP_WAIT_POLICY=passive $drop_cmd
  echo
  echo "## Before: the plain loop with OpenMP's default wait policy"
  echo
  echo "The same baseline rows with \`OMP_WAIT_POLICY\` unset, as the Core table used to be measured."
  echo
  echo "Command: \`env -u OMP_WAIT_POLICY $build/bench/bench_core --baseline-only --repeats 5 --steps 4\`"
  echo
  env -u OMP_WAIT_POLICY "$build/bench/bench_core" --baseline-only --repeats 5 --steps 4
  echo
  echo "## conv3d-stack at 2 stages"
  echo
  conv_cmd="$build/bench/bench_conv3d --convs 4 --filters 16 --volume 32 --batch 8 --repeats 5 --steps 4 --python $python"
  echo "Command: \`OMP_WAIT_POLICY=passive $conv_cmd\`"
  echo
  OMP_WAIT_POLICY=passive $conv_cmd
  echo
  echo "## unet3d: a plain LibTorch loop against tandem stages (bench_device)"
  echo
  echo "The 3D U-Net written as plain torch::nn code (bench/plain_models.h) with tandem's initial"
  echo "weights; the program checks that both give the same loss before timing them in turn. Peak"
  echo "memory over one step, from tandem's CPU allocation accounting. The same program runs on the"
  echo "GPU in scripts/gpu-check.sh."
  echo
  unet_cmd="$build/bench/bench_device --model unet3d --device cpu --levels 3 --filters 8 --volume 32 --batch 8 --stages 2,4 --microbatches 2,4,8 --steps 3 --repeats 5"
  echo "Command: \`OMP_WAIT_POLICY=passive $unet_cmd\`"
  echo
  OMP_WAIT_POLICY=passive $unet_cmd
  echo
  echo "## Single-sample 3D convolutions: LibTorch's path against depth slabs (bench_fold)"
  echo
  echo "One Conv3d of the models above on a single sample, forward and backward, as LibTorch runs it"
  echo "(torch::conv3d) and as tandem's layers do (two depth slabs, include/tandem/models/depth_fold.h)."
  echo
  fold_cmd="$build/bench/bench_fold --threads 1,2 --repeats 5 --iters 5"
  echo "Command: \`OMP_WAIT_POLICY=passive $fold_cmd\`"
  echo
  OMP_WAIT_POLICY=passive $fold_cmd
  echo
  echo "## Bubble with one device per core (mlp, 2 devices, 8 micro-batches, batch 256)"
  echo
  echo "The schedules of the table at the end on 2 devices, so that no two device threads share a core"
  echo "(interleaved: 4 stages, 2 per device). Each line: \`$build/tandem train --model mlp --width 1024 --blocks 8 --data mnist --devices 2 --microbatches 8 --batch 256 --steps 12 --optimizer adam --progress none --trace-steps 10 --report FILE --schedule S\`."
  echo
  schedule_table 2
  echo
  echo "## Measured bubble against the simulator's prediction (GPipe, 4 stages, 8 micro-batches)"
  echo
  cmd="$build/tandem train --model mlp --width 1024 --blocks 8 --data mnist --devices 4 --schedule gpipe --microbatches 8 --batch 256 --steps 12 --optimizer adam --progress none --trace-steps 10 --report $tmp"
  echo "Command: \`$cmd\`"
  echo
  echo '```'
  $cmd | grep -E '^(result|report):'
  echo '```'
  echo
  echo "## Schedules side by side (mlp width 1024, 8 blocks, 4 devices, 8 micro-batches, batch 256)"
  echo
  echo "Each line: \`$build/tandem train --model mlp --width 1024 --blocks 8 --data mnist --devices 4 --microbatches 8 --batch 256 --steps 12 --optimizer adam --progress none --trace-steps 10 --report FILE --schedule S\` (interleaved with \`--virtual-stages 2\`); the step time is the traced steps' mean."
  echo
  schedule_table 4
  echo
  echo "## Partitions under a memory budget (conv3d-stack, 4 devices, 1F1B, --device-memory 27MiB)"
  echo
  bash bench/partition.sh "$build" 5
  echo
  echo "## The default split by measured time against even parameter counts"
  echo
  echo "Command: \`bench/split-time.sh $build 5\`"
  echo
  bash bench/split-time.sh "$build" 5
  echo
  echo "## The planner against measured runs"
  echo
  echo "Command: \`OMP_WAIT_POLICY=passive bench/planner.sh $build/tandem 9\`: each configuration trained"
  echo "with \`train --auto\` and every searched option given, in 3 passes over the sweep (the medians"
  echo "of its runs, and every run against its own plan), then \`--auto\` with none given (and its"
  echo "choice and the best of the sweep in turn, 3 runs each)."
  echo
  OMP_WAIT_POLICY=passive bash bench/planner.sh "$build/tandem" 9
  echo
  echo "### \`tandem plan --volume max\` against training"
  echo
  OMP_WAIT_POLICY=passive bash bench/planner-volume.sh "$build/tandem" 4 192MiB
  echo
  echo "## MPI: transfer through tandem against raw MPI, and 2 ranks against one process"
  echo
  echo "Command: \`bench/mpi.sh $build 5\`"
  echo
  bash bench/mpi.sh "$build" 5
  echo
  echo "## Across simulated hosts: 4 stages on 2 hosts against one host"
  echo
  if why=$(scripts/cluster check); then
    bash bench/cluster.sh "$build" 5 | tail -n +3
    echo
    CLUSTER_MODEL=unet3d bash bench/cluster.sh "$build" 5
  else
    echo "Skipped: $why (bench/cluster.sh needs root and network namespaces)."
  fi
  echo
  echo "## tandem predict on a whole head against PyTorch's whole forward and a sliding window"
  echo
  echo "Command: \`$python bench/predict_speed.py $build/tandem WORKDIR 3\` (its docstring says how)."
  echo
  $python bench/predict_speed.py "$build/tandem" "$(mktemp -d)" 3
  echo
  echo "## Largest volume under a memory budget"
  echo
  echo "Byte counts, not timings: written by \`make bench-memory\` into bench/MEMORY.md."
  echo
  echo "## Reading these numbers"
  echo
  echo "- MPI transfer: the target is 0.8x a raw blocking MPI ping-pong from 1 MiB up. Received"
  echo "  tensors come from a pool of reused host buffers; without it every receive paid the"
  echo "  kernel's first-touch page faults (64 MiB: 0.55-0.58x raw before, 1.49x after, loaded"
  echo "  machine). Small messages pay the header, the progress thread's hand-off and the wake-up"
  echo "  of the receiving thread."
  echo "- The plain loop used to measure at half of tandem's 1 stage (481 against 930 samples/s,"
  echo "  1.935x, in the previous RESULTS.md from \`bench_core --repeats 5 --steps 10\`). The cause"
  echo "  was the loop's set-up, not tandem. (1) libgomp's default wait policy: an"
  echo "  idle OpenMP thread spins for about 300,000 iterations (milliseconds) before it sleeps, but"
  echo "  only about 100 when the process has more OpenMP threads than cores. The loop on the main"
  echo "  thread has exactly 2 OpenMP threads on 2 cores, so after every elementwise op the idle one"
  echo "  spins on into the next GEMM and takes a core from OpenBLAS's own thread (perf record shows"
  echo "  most cycles in libgomp). tandem has two OpenMP teams (the caller's and the device worker's),"
  echo "  so libgomp throttled its spinning: tandem was fast by accident, and so is a plain loop on a"
  echo "  second thread. (2) glibc's main arena: on the main thread freed memory goes back to the"
  echo "  kernel at the end of a step and the next step faults it in again (perf record shows the"
  echo "  kernel clearing pages); other threads' arenas, a tandem device worker's included, keep it."
  echo "  Fixes, in the benchmark only: every compared run has \`OMP_WAIT_POLICY=passive\`, and the"
  echo "  plain loops run on a thread of their own. Before and after: the section \"Before\" against"
  echo "  the Core table's first rows (the main-thread row keeps the cost of (2) in view). A plain"
  echo "  LibTorch program on such a machine should set \`OMP_WAIT_POLICY=passive\` too."
  echo "- Target, 1 stage >= 0.97x the plain loop: see the Core table's target line. The overhead it"
  echo "  measures is small (tens of microseconds per action, last Core table, against actions of"
  echo "  milliseconds), but under load from other work single runs vary by far more than 3% (see"
  echo "  min-max), so the ratio moves by several points from one \`make bench\` to the next. The"
  echo "  hand-offs between the caller and the device worker, a few per step, may be stretched by"
  echo "  such load where a plain loop has none."
  echo "- Target, >= 2x PyTorch's Pipe at equal stages and micro-batches: not met on this machine;"
  echo "  tandem leads in most configurations (Core table). On CPU, Pipe puts every partition on one"
  echo "  worker thread, so its micro-batches run one after another, each GEMM with both cores;"
  echo "  tandem runs the stages at once; with \`--idle-cores lend\` a stage computing while the others"
  echo "  wait multiplies on their cores too (the section \"Idle cores\": at 1 micro-batch, where the"
  echo "  stages compute one after another, about 1.7x the throughput of one core per stage, at the"
  echo "  price of bitwise reproducibility). Both are bound by"
  echo "  the same two cores' GEMM rate, and Pipe at 1 micro-batch is a plain loop, so tandem can only"
  echo "  be 2x where Pipe falls below half of that rate: with many micro-batches Pipe pays Python's"
  echo "  per-micro-batch cost on top of the smaller GEMMs, and the ratio comes closest there. On the"
  echo "  conv3d-stack Pipe leads at 1 to 4 micro-batches: LibTorch's CPU Conv3d spreads much of its"
  echo "  work over ATen's own threads, which tandem does not lend (results would then depend on"
  echo "  timing in their last bits), so a stage computing alone still convolves mostly on one core."
  echo "- Target, the mlp at >= 50% of the matrix-multiply ceiling: met by the plain loops, tandem's"
  echo "  1 stage and, with waiting devices lending their cores, the pipelines at 1 micro-batch. With"
  echo "  more micro-batches the pipeline fills but every GEMM shrinks (the GEMM table's 1/8"
  echo "  micro-batch row runs at a third to a half of the full batch's rate), and while the stages"
  echo "  all compute each has one core. Adam's and the activations' elementwise work counts no FLOPs."
  echo "- Lending cores is a win where stages compute alone (few micro-batches: warm-up, cool-down,"
  echo "  1 micro-batch) and about even with many micro-batches, where the stages mostly compute at"
  echo "  once and a product started on two threads may overlap a device that begins meanwhile."
  echo "  It is opt-in (\`--idle-cores lend\`): fixed shares keep results bitwise repeatable. Under MPI"
  echo "  each rank is its own process with its own cores: nothing to lend across ranks."
  echo "- Target, measured bubble within 5 points of the simulator: met for every schedule with one"
  echo "  device per core (2 devices); on 4 devices met for GPipe, 1F1B and ZB-H1 and not for"
  echo "  interleaved. The simulator assumes each device has a core of its own; 4 device threads on"
  echo "  2 cores wait for one, and interleaved, with twice the actions and messages, waits most."
  echo "- conv3d-stack and unet3d: 8 micro-batches of a batch of 8 are single samples. LibTorch 1.13"
  echo "  convolves a single sample on the CPU through oneDNN only when C x D x H > 20480, and below"
  echo "  that takes an im2col path several times slower per sample. tandem's Conv3d layers run such a"
  echo "  sample as two depth slabs, a batch of two (include/tandem/models/depth_fold.h), so their rows"
  echo "  keep pace with fewer micro-batches; Pipe's single samples still take the slow path (its"
  echo "  8-micro-batch row). Per convolution (bench_fold table): 1.7-9.2x faster as slabs with one"
  echo "  thread; with two, where single runs vary most, up to 6.2x, about even for two of the smaller"
  echo "  volumes, and 0.55x for the first layer (one input channel: little to unfold). The last"
  echo "  \`make bench\` without the slabs (2026-11-30) measured 3.01 samples/s (0.106 of the plain"
  echo "  loop) for tandem's conv3d-stack row and 0.249 and 0.278 for the unet3d rows at 8"
  echo "  micro-batches, with unet3d peaks of 37.7 and 60.8 MiB at 2 stages (the im2col workspace)."
  echo "- unet3d (bench_device): each tandem device holds less at its peak than the plain loop, which"
  echo "  keeps the whole batch's activations at once."
  echo "- More micro-batches of a fixed batch make each GEMM smaller: on 2 cores throughput"
  echo "  falls past 4 micro-batches although the bubble shrinks."
  echo "- Partitions under a budget: the memory split plans the smallest largest peak, so under 1F1B"
  echo "  it gives the first stages, which hold more micro-batches, fewer layers and the last stage"
  echo "  most of the compute; the fit split takes the most even FLOPs among the splits that fit."
  echo "- GPU results (H200, scripts/gpu-check.sh) are kept in bench/GPU-CHECK.md."
} > "$out.new"
mv "$out.new" "$out"
rm -f "$tmp"
echo "bench: wrote $out"
