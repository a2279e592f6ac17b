#!/usr/bin/env bash
# The GPU check: builds tandem on the GPU machine against its Python LibTorch (with CUDA), runs
# the GPU tests and the runtime tests, and times a pipelined run against a one-device run.
# Written for one run on a machine without internet or development packages: fill .gpu-deps
# first (scripts/gpu-deps.sh, on a machine with the Debian packages) and carry it along.
#
#   usage: scripts/gpu-check.sh        (from anywhere; OUT=folder for the logs, default
#                                       /tmp/gpu-check)
#
# Steps, each with a time limit; a failing step is recorded and the next one runs:
#   1. environment: GPUs, driver, LibTorch, CUDA, compilers
#   2. configure build-gpu with CMake (vendored deps, TANDEM_CUDA_CHECK=ON, Release; MPI when
#      mpicxx exists). LibTorch's CMake package needs the CUDA toolkit (nvcc); where configure
#      fails, 3. builds the same binaries directly with g++ (no MPI) instead.
#   3. build tandem_cli test_cuda test_runtime bench_device (-j16)
#   4. test_cuda (limit 180 s), test_runtime (limit 120 s)
#   5. tandem train: MLP on MNIST, 2 stages on cuda:0 (1F1B, 8 micro-batches) against 1 device;
#      the 3D U-Net on 64^3 volumes, 2 stages (1F1B, 4 micro-batches) against 1 device, when
#      this build's CLI offers --model unet3d
#   6. conv3d-stack (10 x 64 filters, 64^3): 1 device against 2 and 4 stages on cuda:0
#   7. bench_device: a plain LibTorch loop (torch::nn modules) against tandem with 2 and 4
#      stages x 4 and 8 micro-batches on cuda:0, conv3d-stack (as in 6) and unet3d (96^3,
#      batch 8): samples/s, ratio, the allocator's peak; their tables go to results.md
#   9. CUDA tensors between ranks (MPI builds): test_mpi_transport's CudaPath tests on 2 ranks,
#      and the mlp on 2 ranks sharing cuda:0 with --mpi-cuda auto against staged (the same
#      loss; auto is direct GPU-to-GPU when this MPI is CUDA-aware)
#  10. the largest whole scan tandem predict takes under --device-memory 16GiB, --spatial 1, 2
#      and 4 sharing cuda:0, with bytes per voxel against one device (scripts/gpu-check-predict.sh)
#  11. --precision fp32, bf16 and fp16: the largest unet3d volume under --device-memory 16GiB on
#      cuda:0 for each, and the speed of each at fp32's volume (scripts/gpu-check-precision.sh)
#   8. (last: it takes what is left of the time) the largest unet3d volume (96..256) that
#      trains under --device-memory 16GiB: 1 rank, then --spatial 2 and 4 (every sample cut
#      into depth slabs, the groups sharing cuda:0), then 4 ranks sharing cuda:0 under mpirun
#      (memory partition), from the volume 1 rank reached; each with the GPU's peak bytes per
#      voxel of the volume, against one rank's
# Everything lands in $OUT: one log per step and results.md (a table of the steps with their
# exit status, the `result:` lines, the tests' largest errors), printed again at the end.
# The whole run stays under 8 minutes on 16 cores: later steps are skipped past the deadline.
#
# For a dry run elsewhere (a CPU LibTorch: the tests skip, the cuda runs fail):
#   GPU_CHECK_BUDGET_S  seconds for the whole run (465); the build may take all but 110 of them
#   GPU_CHECK_BUILD_DIR build folder (build-gpu)      GPU_CHECK_JOBS  build jobs (cores, <= 16)
#   GPU_CHECK_ROUTE     auto (CMake, then g++ where configure fails) | cmake | gxx
#   GPU_CHECK_STEPS     the steps after the build to run ("4 5 6 7 8 9 10 11"), e.g. "7 8" to rerun
#                       those on a machine still warm (the build folder is kept; it rebuilds
#                       only what changed)
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
root=$PWD
out=${OUT:-/tmp/gpu-check}
mkdir -p "$out"
build=$root/${GPU_CHECK_BUILD_DIR:-build-gpu}
deps=$root/.gpu-deps
jobs=${GPU_CHECK_JOBS:-$(nproc 2>/dev/null || echo 16)}
((jobs > 16)) && jobs=16
route=${GPU_CHECK_ROUTE:-auto}
budget=${GPU_CHECK_BUDGET_S:-465}
steps_wanted=${GPU_CHECK_STEPS:-4 5 6 7 8 9 10 11}
current_step=1
start=$(date +%s)
deadline=$((start + budget))

rows=()
env_lines=()
results_extra=()
build_route="none"

# section "N. title": starts step N (steps 1-3, environment and build, always run).
section() {
  current_step=${1%%.*}
  printf '\n======== %s  [t=%ss] ========\n' "$1" "$(($(date +%s) - start))"
}
wanted() { [[ ! $1 =~ ^[0-9]+$ ]] || (($1 <= 3)) || [[ " $steps_wanted " == *" $1 "* ]]; }

write_results() {
  {
    echo "# tandem GPU check"
    echo
    echo "$(date -u '+%Y-%m-%d %H:%M UTC') on $(uname -n), ${jobs} build jobs, build route: ${build_route}."
    echo
    for line in "${env_lines[@]}"; do echo "- $line"; done
    echo
    echo "| step | status | seconds | details |"
    echo "| --- | --- | --- | --- |"
    for r in "${rows[@]}"; do echo "$r"; done
    for block in "${results_extra[@]}"; do
      echo
      echo "$block"
    done
  } >"$out/results.md"
}

# record NAME STATUS SECONDS DETAILS
record() {
  local details=${4//|/\\|}
  rows+=("| $1 | $2 | $3 | ${details//$'\n'/<br>} |")
  write_results
}

status_of() {  # status_of RC LIMIT
  case $1 in
    0) echo ok ;;
    124 | 137) echo "TIMEOUT (${2}s)" ;;
    99) echo "skipped (8-minute budget spent)" ;;
    98) echo "skipped (not in GPU_CHECK_STEPS)" ;;
    *) echo "FAILED (rc $1)" ;;
  esac
}

# run_step LIMIT LOG CMD...: runs CMD with a time limit (cut to the deadline) into $out/LOG,
# shows the log's tail; sets step_rc, step_seconds and step_limit. Returns 99 past the deadline
# and 98 when the current step is not wanted (GPU_CHECK_STEPS).
run_step() {
  step_limit=$1
  local log=$out/$2
  shift 2
  if ! wanted "$current_step"; then
    step_rc=98 step_seconds=0
    echo "(skipped: step $current_step is not in GPU_CHECK_STEPS=$steps_wanted)"
    return 98
  fi
  local left=$((deadline - $(date +%s)))
  if ((left < 20)); then
    step_rc=99 step_seconds=0
    echo "(skipped: the 8-minute budget is spent)"
    return 99
  fi
  ((step_limit > left)) && step_limit=$left
  ((step_limit < 10)) && step_limit=10
  printf '$ %s\n' "$*" >"$log"
  local t0
  t0=$(date +%s)
  timeout -k 10 "$step_limit" "$@" >>"$log" 2>&1
  step_rc=$?
  step_seconds=$(($(date +%s) - t0))
  tail -n 25 "$log"
  echo "(exit status ${step_rc} after ${step_seconds}s)"
  return "$step_rc"
}

# ---------------------------------------------------------------------------------------------
section "1. environment"
{
  echo "## nvidia-smi -L"
  nvidia-smi -L 2>&1 || echo "nvidia-smi not available"
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1
  echo "## compilers and tools"
  g++ --version 2>&1 | head -1
  cmake --version 2>&1 | head -1
  echo "ninja $(ninja --version 2>&1)"
  command -v mpicxx >/dev/null && echo "mpicxx: $(mpicxx --showme:version 2>&1 | head -1)" || echo "mpicxx: none"
  # Whether this MPI can take the direct path for CUDA tensors (--mpi-cuda auto uses it then).
  command -v ompi_info >/dev/null &&
    echo "MPI built with CUDA support: $(ompi_info --parsable --all 2>/dev/null |
      grep -m 1 'mpi_built_with_cuda_support:value' | cut -d: -f7)"
  echo "cores: $(nproc)"
} 2>&1 | tee "$out/environment.log"

# One Python start (importing torch with CUDA takes seconds): LibTorch's folders, ABI, CUDA.
python3 - >"$out/torch.env" 2>"$out/torch.err" <<'EOF'
import glob, os, shlex
import torch, torch.utils
def say(k, v): print("%s=%s" % (k, shlex.quote(str(v))))
say("TORCH_VERSION", torch.__version__)
say("TORCH_CUDA", torch.version.cuda)
say("TORCH_DIR", os.path.dirname(torch.__file__))
say("TORCH_CMAKE", torch.utils.cmake_prefix_path)
say("TORCH_ABI", int(torch._C._GLIBCXX_USE_CXX11_ABI))
say("TORCH_CUDA_OK", int(torch.cuda.is_available()))
say("TORCH_CUDNN", torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else "none")
# The CUDA runtime's headers and library: the toolkit's, or those of the nvidia-* wheels.
inc, lib = "", ""
for d in ["/usr/local/cuda/include"]:
    if os.path.exists(os.path.join(d, "cuda_runtime_api.h")): inc = d
for f in sorted(glob.glob("/usr/local/cuda/lib64/libcudart.so*")): lib = lib or f
try:
    import nvidia
    for p in nvidia.__path__:
        for d in sorted(glob.glob(os.path.join(p, "*", "include"))):
            if not inc and os.path.exists(os.path.join(d, "cuda_runtime_api.h")): inc = d
        for f in sorted(glob.glob(os.path.join(p, "*", "lib", "libcudart.so*"))): lib = lib or f
except Exception:
    pass
say("CUDA_INC", inc)
say("CUDART", lib)
EOF
TORCH_VERSION=unknown TORCH_CUDA=unknown TORCH_DIR="" TORCH_CMAKE="" TORCH_ABI=1 TORCH_CUDA_OK=0
TORCH_CUDNN=unknown CUDA_INC="" CUDART=""
# shellcheck disable=SC1090,SC1091
source "$out/torch.env"
cat "$out/torch.env" "$out/torch.err" | tee -a "$out/environment.log"
gpu=$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null | head -1)
env_lines+=("GPU: ${gpu:-none found} ($(nvidia-smi -L 2>/dev/null | wc -l) visible)")
env_lines+=("LibTorch ${TORCH_VERSION}, CUDA ${TORCH_CUDA}, cuDNN ${TORCH_CUDNN}, torch.cuda.is_available()=${TORCH_CUDA_OK}, C++11 ABI ${TORCH_ABI}")
env_lines+=("$(g++ --version 2>&1 | head -1); $(cmake --version 2>&1 | head -1); ninja $(ninja --version 2>&1)")
env_lines+=("CUDA runtime headers: ${CUDA_INC:-none}; libcudart: ${CUDART:-none}")
env_lines+=("$(grep -m 1 'MPI built with CUDA support' "$out/environment.log" || echo 'MPI: no ompi_info')")
status=ok
[ -n "$TORCH_DIR" ] || status="FAILED (python3 cannot import torch)"
[ -f "$deps/fmt/include/fmt/format.h" ] || status="FAILED (no .gpu-deps: run scripts/gpu-deps.sh and carry it)"
record "environment" "$status" "$(($(date +%s) - start))" "see environment.log"

# ---------------------------------------------------------------------------------------------
section "2. configure (CMake)"
mpi=OFF
command -v mpicxx >/dev/null 2>&1 && mpi=ON
# LibTorch's CMake package looks for the CUDA toolkit; point it at one when nvcc is not on PATH.
cuda_args=()
if ! command -v nvcc >/dev/null 2>&1; then
  for d in ${CUDA_HOME:-} /usr/local/cuda /usr/local/cuda-*; do
    if [ -x "$d/bin/nvcc" ]; then
      export PATH=$d/bin:$PATH CUDA_HOME=$d
      cuda_args=(-DCUDAToolkit_ROOT="$d" -DCUDA_TOOLKIT_ROOT_DIR="$d")
      break
    fi
  done
fi
echo "nvcc: $(command -v nvcc || echo none)"
configure() {  # configure MPI
  run_step 90 "configure-mpi-$1.log" cmake -S "$root" -B "$build" -G Ninja \
    -DCMAKE_PREFIX_PATH="$TORCH_CMAKE" -DTANDEM_VENDORED_DEPS="$deps" -DTANDEM_CUDA_CHECK=ON \
    -DTANDEM_BUILD_BENCH=OFF -DCMAKE_BUILD_TYPE=Release -DTANDEM_WITH_MPI="$1" \
    -DCMAKE_GTEST_DISCOVER_TESTS_DISCOVERY_MODE=PRE_TEST "${cuda_args[@]}"
  local rc=$?
  record "configure (CMake, MPI $1)" "$(status_of $rc "$step_limit")" "$step_seconds" \
    "$(grep -m 3 -E 'CMake Error|FATAL|Could NOT find' "$out/configure-mpi-$1.log" 2>/dev/null)"
  return $rc
}
configured=0
if [ "$route" = gxx ]; then
  record "configure (CMake)" "skipped" 0 "GPU_CHECK_ROUTE=gxx"
elif configure "$mpi"; then
  configured=1
else
  # Without MPI only when MPI (and not LibTorch's CUDA) is what failed.
  errors=$(grep -A 8 'CMake Error' "$out/configure-mpi-$mpi.log" 2>/dev/null)
  if [ "$mpi" = ON ] && grep -q 'MPI' <<<"$errors" && ! grep -q -i 'cuda' <<<"$errors"; then
    configure OFF && configured=1 && mpi=OFF
  fi
fi

# ---------------------------------------------------------------------------------------------
section "3. build tandem_cli test_cuda test_runtime bench_device (test_mpi_transport with MPI)"
bin_tandem=$build/tandem
bin_mpi_transport=$build/tests/mpi/test_mpi_transport
bin_cuda=$build/tests/test_cuda
bin_runtime=$build/tests/test_runtime
bin_bench=$build/bench/bench_device

# The same four binaries without CMake: g++ on the sources, LibTorch from its Python package,
# no MPI. One precompiled <torch/torch.h> for every source that uses LibTorch.
# shellcheck disable=SC2054  # the commas belong to -Wl options
fallback_build() {
  local fb=$build/fallback
  rm -rf "$fb"
  mkdir -p "$fb/obj" "$build/tests" "$build/bench"
  local have_cuda=0 cuda_inc=() libs=()
  # CUDA memory statistics (src/memory/cuda_stats.cc) need LibTorch's CUDA build and the CUDA
  # runtime's headers and library; without them that part builds its CPU-only stubs.
  if [ -n "$CUDA_INC" ] && [ -n "$CUDART" ] && [ -e "$TORCH_DIR/lib/libc10_cuda.so" ] &&
    [ -e "$TORCH_DIR/include/c10/cuda/CUDACachingAllocator.h" ]; then
    have_cuda=1
    cuda_inc=(-isystem "$CUDA_INC")
  fi
  local zlib_inc=()
  echo '#include <zlib.h>' | g++ -E -x c++ - >/dev/null 2>&1 || zlib_inc=(-I"$deps/zlib/include")
  local flags=(-std=c++17 -O2 -DNDEBUG -DFMT_HEADER_ONLY=1 -D_GLIBCXX_USE_CXX11_ABI="$TORCH_ABI"
    -DTANDEM_HAVE_CUDA="$have_cuda" -Wall -Wextra -Wno-unused-parameter
    -I"$root/include" -I"$deps/fmt/include" -I"$deps/nlohmann_json/include"
    -I"$deps/cli11/include" -I"$deps/googletest/googletest/include" -I"$deps/googletest/googletest"
    -I"$deps/nifti/include/nifti"
    "${zlib_inc[@]}" -isystem "$TORCH_DIR/include"
    -isystem "$TORCH_DIR/include/torch/csrc/api/include" "${cuda_inc[@]}")
  echo "fallback: TANDEM_HAVE_CUDA=$have_cuda, flags: ${flags[*]}"
  echo '#include <torch/torch.h>' >"$fb/pch.h"
  g++ "${flags[@]}" -x c++-header "$fb/pch.h" -o "$fb/pch.h.gch" || echo "fallback: no precompiled header"
  {
    printf '#!/usr/bin/env bash\n# compile SOURCE OBJECT [pch]\n'
    printf 'extra=(); [ "${3:-}" = pch ] && extra=(-include %q -Winvalid-pch)\n' "$fb/pch.h"
    printf 'g++ %s "${extra[@]}" -c "$1" -o "$2" >"$2.log" 2>&1 && exit 0\n' "$(printf '%q ' "${flags[@]}")"
    printf 'echo "compile failed: $1"; grep -m 20 -E "error|Error" "$2.log"; exit 1\n'
  } >"$fb/cc.sh"
  chmod +x "$fb/cc.sh"
  local list=$fb/sources.txt src
  : >"$list"
  for src in "$root"/src/*/*.cc "$root"/tests/runtime/*.cc "$root"/tests/cuda/*.cc \
    "$root"/bench/bench_device.cc; do
    case $src in "$root"/src/mpi/*) continue ;; esac
    echo "$src $fb/obj/$(echo "${src#"$root"/}" | tr / _).o pch" >>"$list"
  done
  # tandem::build_info(), which a CMake build writes at every build (cmake/build_info.cmake).
  local version
  version=$(sed -n 's/^project(tandem VERSION \([0-9.]*\).*/\1/p' "$root/CMakeLists.txt")
  cmake -DSOURCE="$root" -DOUT="$fb/build_info.cc" -DVERSION="$version" \
    -P "$root/cmake/build_info.cmake"
  echo "$fb/build_info.cc $fb/obj/src_common_build_info_generated.o pch" >>"$list"
  echo "$deps/googletest/googletest/src/gtest-all.cc $fb/obj/gtest-all.o" >>"$list"
  echo "$deps/googletest/googletest/src/gtest_main.cc $fb/obj/gtest_main.o" >>"$list"
  xargs -P "$jobs" -L 1 "$fb/cc.sh" <"$list"
  local o lib_objs=()
  for o in "$fb"/obj/src_*.o; do
    case $o in *src_cli_*) ;; *) lib_objs+=("$o") ;; esac
  done
  libs=(-L"$TORCH_DIR/lib" -Wl,-rpath,"$TORCH_DIR/lib" -Wl,--no-as-needed -ltorch -ltorch_cpu -lc10)
  [ -e "$TORCH_DIR/lib/libtorch_cuda.so" ] && libs+=(-ltorch_cuda)
  [ -e "$TORCH_DIR/lib/libc10_cuda.so" ] && libs+=(-lc10_cuda)
  libs+=(-Wl,--as-needed)
  ((have_cuda)) && libs+=("$CUDART" -Wl,-rpath,"$(dirname "$CUDART")")
  if echo 'int main(){}' | g++ -x c++ - -lz -o /dev/null 2>/dev/null; then
    libs+=(-lz)
  else
    libs+=("$(ldconfig -p | awk '/libz\.so\.1 /{print $NF; exit}')")
  fi
  libs=("$deps/nifti/lib/libnifti2.a" "$deps/nifti/lib/libznz.a" "${libs[@]}")
  libs+=(-lm -lpthread -ldl)
  local rc=0
  g++ -o "$bin_tandem" "$fb"/obj/src_cli_*.o "${lib_objs[@]}" "${libs[@]}" || rc=1
  g++ -o "$bin_cuda" "$fb"/obj/tests_cuda_*.o "${lib_objs[@]}" "$fb/obj/gtest-all.o" \
    "$fb/obj/gtest_main.o" "${libs[@]}" || rc=1
  g++ -o "$bin_runtime" "$fb"/obj/tests_runtime_*.o "${lib_objs[@]}" "$fb/obj/gtest-all.o" \
    "$fb/obj/gtest_main.o" "${libs[@]}" || rc=1
  g++ -o "$bin_bench" "$fb"/obj/bench_bench_device.cc.o "${lib_objs[@]}" "${libs[@]}" || rc=1
  return $rc
}
export -f fallback_build
export build deps root jobs bin_tandem bin_cuda bin_runtime bin_bench TORCH_DIR TORCH_ABI CUDA_INC CUDART

any_built() { [ -x "$bin_tandem" ] || [ -x "$bin_cuda" ] || [ -x "$bin_runtime" ] || [ -x "$bin_bench" ]; }
if ((configured)); then
  build_route="CMake (MPI $mpi)"
  targets=(tandem_cli test_cuda test_runtime bench_device)
  [ "$mpi" = ON ] && targets+=(test_mpi_transport)
  run_step $((deadline - $(date +%s) - 110)) build.log cmake --build "$build" -j "$jobs" --target "${targets[@]}" -- -k 0
  record "build (CMake, -j$jobs)" "$(status_of $step_rc "$step_limit")" "$step_seconds" \
    "$(grep -m 5 -E 'error:|FAILED:|undefined reference' "$out/build.log" 2>/dev/null)"
fi
# Without CMake, g++ builds everything afresh (a build folder kept on a warm machine may hold
# binaries of older code). A CMake build that made some binaries failed in the code: g++ would
# fail the same way.
if [ "$route" != cmake ] && { ((!configured)) || ! any_built; }; then
  build_route="g++ directly (no MPI)"
  mkdir -p "$build"
  run_step $((deadline - $(date +%s) - 110)) build-fallback.log bash -c fallback_build
  record "build (g++ directly, -j$jobs)" "$(status_of $step_rc "$step_limit")" "$step_seconds" \
    "$(grep -m 5 -E 'compile failed|error:|undefined reference' "$out/build-fallback.log" 2>/dev/null)"
fi
write_results

# ---------------------------------------------------------------------------------------------
# built BINARY NAME: true when BINARY exists; otherwise records step NAME as not built.
built() {
  [ -x "$1" ] && return 0
  record "$2" "not built" 0 ""
  return 1
}

# gtest_step NAME BINARY LIMIT: runs one GoogleTest binary and records its summary.
gtest_step() {
  local name=$1 bin=$2 limit=$3
  section "4. $name"
  built "$bin" "$name" || return
  run_step "$limit" "$name.log" "$bin" --gtest_brief=1
  local summary
  summary=$(grep -E '^\[  (PASSED|SKIPPED|FAILED) +\]' "$out/$name.log" 2>/dev/null | head -12)
  record "$name" "$(status_of $step_rc "$step_limit")" "$step_seconds" "$summary"
}
gtest_step test_cuda "$bin_cuda" 180
for model in mlp unet3d; do
  worst=$(grep -h "^$model: max relative gradient error" "$out/test_cuda.log" 2>/dev/null | sort -g -k6 | tail -1)
  [ -n "$worst" ] && results_extra+=("test_cuda, largest over the cases, ${worst}")
done
gtest_step test_runtime "$bin_runtime" 120

# ---------------------------------------------------------------------------------------------
section "5. tandem train on the GPU"
mnist=()
[ -f "$root/data/mnist/train-images-idx3-ubyte" ] || mnist=(--data-dir "$deps/mnist")
result_lines=()
# train_step SLUG NAME LIMIT ARGS...: one `tandem train` run into train-SLUG.log; keeps its
# result: line.
train_step() {
  local slug=$1 name=$2 limit=$3
  shift 3
  built "$bin_tandem" "$name" || return
  run_step "$limit" "train-$slug.log" "$bin_tandem" train "$@"
  local line
  line=$(grep -m 1 '^result:' "$out/train-$slug.log" 2>/dev/null)
  [ "$step_rc" = 98 ] || result_lines+=("$name: $line")
  record "$name" "$(status_of $step_rc "$step_limit")" "$step_seconds" \
    "${line:-$(grep -m 2 -i 'error\|tandem:' "$out/train-$slug.log" 2>/dev/null)}"
}
mlp=(--model mlp --data mnist "${mnist[@]}" --batch 256 --steps 50 --progress none)
help=""
[ -x "$bin_tandem" ] && help=$("$bin_tandem" train --help 2>&1)
report=()
grep -q -- '--report' <<<"$help" && report=(--report "$out/report-mlp-2stages.json")
train_step mlp-2stages "mlp 2 stages on cuda:0,cuda:0 (1f1b, 8 micro-batches)" 90 \
  "${mlp[@]}" --devices cuda:0,cuda:0 --schedule 1f1b --microbatches 8 "${report[@]}"
# The report's memory list: the shared GPU once, with both devices.
if [ -f "$out/report-mlp-2stages.json" ]; then
  results_extra+=("report of mlp 2 stages on cuda:0,cuda:0, its memory list: $(python3 -c '
import json, sys
print(json.dumps(json.load(open(sys.argv[1])).get("memory", "no memory list")))' "$out/report-mlp-2stages.json" 2>&1)")
fi
train_step mlp-1device "mlp 1 device cuda:0 (sequential)" 90 \
  "${mlp[@]}" --devices cuda:0 --schedule sequential --microbatches 1

if grep -q 'unet3d' <<<"$help"; then
  # Only the options this build's CLI documents: 64^3 synthetic volumes, the model's default
  # filters and levels, a small held-out set so that the final evaluation stays short.
  unet=(--model unet3d --batch 4 --steps 20 --progress none)
  grep -q 'spheres' <<<"$help" && unet+=(--data spheres)
  grep -q -- '--volume' <<<"$help" && unet+=(--volume 64)
  grep -q -- '--test-samples' <<<"$help" && unet+=(--test-samples 4 --eval-batch 4)
  train_step unet3d-2stages "unet3d 2 stages on cuda:0,cuda:0 (1f1b, 4 micro-batches)" 90 \
    "${unet[@]}" --devices cuda:0,cuda:0 --schedule 1f1b --microbatches 4
  train_step unet3d-1device "unet3d 1 device cuda:0 (sequential)" 90 \
    "${unet[@]}" --devices cuda:0 --schedule sequential --microbatches 1
else
  record "unet3d runs" "skipped" 0 "this build's tandem train has no --model unet3d"
fi
# ---------------------------------------------------------------------------------------------
section "6. conv3d-stack on the GPU: 1 device against 2 and 4 stages on cuda:0"
if grep -q 'conv3d-stack' <<<"$help"; then
  conv=(--model conv3d-stack --convs 10 --filters 64 --data regression --volume 64 --batch 8
    --steps 20 --train-samples 160 --test-samples 0 --progress none)
  train_step conv3d-1device "conv3d-stack 1 device cuda:0 (sequential)" 60 \
    "${conv[@]}" --devices cuda:0 --schedule sequential --microbatches 1
  train_step conv3d-2stages "conv3d-stack 2 stages on cuda:0 (1f1b, 4 micro-batches)" 60 \
    "${conv[@]}" --devices cuda:0,cuda:0 --schedule 1f1b --microbatches 4
  train_step conv3d-4stages "conv3d-stack 4 stages on cuda:0 (1f1b, 8 micro-batches)" 60 \
    "${conv[@]}" --devices cuda:0,cuda:0,cuda:0,cuda:0 --schedule 1f1b --microbatches 8
fi

# ---------------------------------------------------------------------------------------------
section "7. plain LibTorch against tandem on cuda:0 (bench_device)"
# bench_step SLUG NAME LIMIT ARGS...: one bench_device run into bench-SLUG.log; its table goes
# to results.md.
bench_step() {
  local slug=$1 name=$2 limit=$3
  shift 3
  built "$bin_bench" "$name" || return
  run_step "$limit" "bench-$slug.log" "$bin_bench" --device cuda:0 "$@"
  local log=$out/bench-$slug.log
  record "$name" "$(status_of $step_rc "$step_limit")" "$step_seconds" \
    "$(grep -m 1 -E '^# same function|bench_device:' "$log" 2>/dev/null | cut -c 1-400)"
  results_extra+=("$(printf '## %s\n\n`bench_device --device cuda:0 %s`\n\n' "$name" "$*"
    grep -E '^(# |\|)' "$log" 2>/dev/null)")
}
bench_step conv3d "conv3d-stack: plain LibTorch loop against tandem, 2 and 4 stages on cuda:0" 100 \
  --model conv3d-stack --convs 10 --filters 64 --volume 64 --batch 8 --stages 2,4 \
  --microbatches 4,8 --steps 5 --repeats 3
bench_step unet3d "unet3d: plain LibTorch loop against tandem, 2 and 4 stages on cuda:0" 100 \
  --model unet3d --levels 4 --filters 32 --volume 96 --batch 8 --stages 2,4 \
  --microbatches 4,8 --steps 5 --repeats 3

# ---------------------------------------------------------------------------------------------
section "9. CUDA tensors between ranks: staged, and direct on a CUDA-aware MPI"
if command -v mpirun >/dev/null && [[ $build_route == *"MPI ON"* ]]; then
  mpirun=(mpirun --allow-run-as-root --oversubscribe --bind-to none -n 2)
  if built "$bin_mpi_transport" "test_mpi_transport CudaPath (2 ranks)"; then
    run_step 90 mpi-cuda-path.log "${mpirun[@]}" "$bin_mpi_transport" --gtest_filter='CudaPath*' --gtest_color=no \
      --gtest_brief=1
    record "test_mpi_transport CudaPath (2 ranks)" "$(status_of $step_rc "$step_limit")" \
      "$step_seconds" "$(grep -E '^\[  (PASSED|SKIPPED|FAILED) +\]' "$out/mpi-cuda-path.log" | sort -u | head -6)"
  fi
  declare -A mpi_loss=()
  for path in staged auto; do
    name="mlp 2 ranks on cuda:0,cuda:0, --mpi-cuda $path"
    built "$bin_tandem" "$name" || break
    run_step 90 "train-mpi-$path.log" "${mpirun[@]}" "$bin_tandem" train "${mlp[@]}" \
      --devices cuda:0,cuda:0 --schedule 1f1b --microbatches 8 --mpi-cuda "$path" \
      --report "$out/report-mpi-$path.json"
    line=$(grep -m 1 'result:' "$out/train-mpi-$path.log" 2>/dev/null)
    way=$(grep -m 1 -o 'CUDA tensors between ranks: .*' "$out/train-mpi-$path.log" 2>/dev/null)
    mpi_loss[$path]=$(grep -o -m 1 ' loss=[0-9.]*' <<<"$line")
    [ "$step_rc" = 98 ] || result_lines+=("$name: $line")
    record "$name" "$(status_of $step_rc "$step_limit")" "$step_seconds" \
      "${way:-}<br>${line:-$(grep -m 2 -i 'error\|tandem:' "$out/train-mpi-$path.log" 2>/dev/null)}"
  done
  if [ -n "${mpi_loss[staged]:-}" ] && [ -n "${mpi_loss[auto]:-}" ]; then
    same=no
    [ "${mpi_loss[staged]}" = "${mpi_loss[auto]}" ] && same=yes
    results_extra+=("mlp on 2 ranks: --mpi-cuda staged${mpi_loss[staged]}, auto${mpi_loss[auto]}; the same: $same ($(grep -m 1 -o 'CUDA tensors between ranks: .*' "$out/train-mpi-auto.log"))")
  fi
  # Two processes on one GPU: one memory per rank (cuda:0@r0, cuda:0@r1), each from its own
  # caching allocator, and every device's busy share.
  if [ -f "$out/report-mpi-auto.json" ]; then
    results_extra+=("report of mlp on 2 ranks sharing cuda:0: $(python3 -c '
import json, sys
j = json.load(open(sys.argv[1]))
print(json.dumps({"memory": j.get("memory"), "busy": [d["busy"] for d in j.get("devices", [])],
                  "bubble_measured": j.get("bubble_measured"), "bubble_predicted": j.get("bubble_predicted")}))' "$out/report-mpi-auto.json" 2>&1)")
  fi
else
  record "CUDA tensors between ranks" "skipped" 0 "no mpirun, or a build without MPI"
fi

# shellcheck source=scripts/gpu-check-predict.sh
source "$root/scripts/gpu-check-predict.sh"
# shellcheck source=scripts/gpu-check-precision.sh
source "$root/scripts/gpu-check-precision.sh"

# ---------------------------------------------------------------------------------------------
section "8. the largest unet3d volume under a 16 GiB cap: 1 rank against 4 ranks on cuda:0"
# volume_search NAME LIMIT FROM CMD...: tries --volume FROM, ... 256 (of 96, 128, ... 256) with
# one training step each (LIMIT seconds each) and records the largest that ends with status 0
# (3 = out of the cap stops the search); sets search_best to it (or none).
search_best=none
volume_search() {
  local name=$1 limit=$2 from=$3
  shift 3
  local best=none v stop=""
  search_best=none
  search_per_voxel=""
  if ! wanted "$current_step"; then
    record "largest unet3d volume, $name" "$(status_of 98 0)" 0 ""
    return
  fi
  for v in 96 128 160 192 224 256; do
    ((v < from)) && continue
    run_step "$limit" "volume-${name// /_}-$v.log" "$@" --volume "$v"
    if [ "$step_rc" != 0 ]; then
      stop="<br>$v^3: $(status_of "$step_rc" "$step_limit"): $(tail -n +2 "$out/volume-${name// /_}-$v.log" 2>/dev/null |
        grep -m 1 -i 'memory\|error\|tandem:' | cut -c 1-300)"
      break
    fi
    best=$v
  done
  search_best=$best
  local line per_voxel="" peak
  line=$(grep -h -m 1 'result:' "$out/volume-${name// /_}-$best.log" 2>/dev/null || true)
  # Bytes per voxel: the GPU's peak (every slab's, on the one GPU) over the volume's voxels,
  # against one rank's at its own largest volume.
  peak=$(grep -o 'peak_mem_cuda:0[^ ]*=[0-9]*' <<<"$line" | head -1 | cut -d= -f2)
  if [[ $best =~ ^[0-9]+$ && -n $peak ]]; then
    search_per_voxel=$(awk -v p="$peak" -v v="$best" 'BEGIN { printf "%.0f", p / (v * v * v) }')
    per_voxel="<br>bytes per voxel: $search_per_voxel"
    [[ -n ${one_rank_per_voxel:-} ]] && per_voxel+=" ($(awk -v a="$search_per_voxel" \
      -v b="$one_rank_per_voxel" 'BEGIN { printf "%.2f", a / b }')x one rank's)"
  fi
  record "largest unet3d volume, $name" "$best" 0 "$line$per_voxel$stop"
}
if grep -q -- '--device-memory' <<<"$help"; then
  cap=(train --model unet3d --data spheres --batch 1 --microbatches 1 --steps 1
    --train-samples 1 --test-samples 0 --dropout 0 --device-memory 16GiB --progress none)
  volume_search "1 rank" 60 96 "$bin_tandem" "${cap[@]}" --devices cuda:0 --schedule sequential
  one_rank_best=$search_best
  one_rank_per_voxel=${search_per_voxel:-}
  if grep -q -- '--spatial' <<<"$help"; then
    # Every sample cut into 2 and 4 depth slabs, the groups' devices sharing cuda:0 (the cap
    # is the GPU's, shared by the devices on it), from the volume one device reached.
    from=96
    [[ $one_rank_best =~ ^[0-9]+$ ]] && from=$one_rank_best
    volume_search "spatial 2" 60 "$from" "$bin_tandem" "${cap[@]}" --devices cuda:0,cuda:0 \
      --spatial 2 --schedule sequential
    volume_search "spatial 4" 60 "$from" "$bin_tandem" "${cap[@]}" \
      --devices cuda:0,cuda:0,cuda:0,cuda:0 --spatial 4 --schedule sequential
  fi
  search_best=$one_rank_best
  if command -v mpirun >/dev/null && [[ $build_route == *"MPI ON"* ]]; then
    # From the volume 1 rank reached: 4 ranks must at least train that. --partition memory:
    # rank 0 measures the layers once on the CPU (slower at large volumes).
    from=96
    [[ $search_best =~ ^[0-9]+$ ]] && from=$search_best
    volume_search "4 ranks" 90 "$from" mpirun --allow-run-as-root --oversubscribe --bind-to none -n 4 \
      "$bin_tandem" "${cap[@]}" --devices cuda:0,cuda:0,cuda:0,cuda:0 --schedule 1f1b \
      --partition memory
  else
    record "largest unet3d volume, 4 ranks" "skipped" 0 "no mpirun, or a build without MPI"
  fi
fi

if ((${#result_lines[@]})); then
  results_extra+=("$(printf '## result lines\n\n```\n'; printf '%s\n' "${result_lines[@]}"; printf '```')")
fi

section "done"
record "total" "-" "$(($(date +%s) - start))" "logs in $out"
cat "$out/results.md"
