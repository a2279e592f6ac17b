#!/usr/bin/env bash
# train_check.sh DRIVER PYTHON FIXTURES NAME LOSS DEVICES MICROBATCHES [LAUNCHER...]
# Trains fixture NAME with onnx_train_driver (under LAUNCHER, e.g. mpirun -n 2, when given)
# and compares tandem's consolidated weights with PyTorch's own training (check_training.py).
set -euo pipefail
driver=$1 python=$2 fixtures=$3 name=$4 loss=$5 devices=$6 microbatches=$7
shift 7
here=$(cd "$(dirname "$0")" && pwd)
tag=${name}_d${devices}_m${microbatches}${1:+_launched}
out=$(mktemp -d "${TMPDIR:-/tmp}/tandem_onnx_${tag}.XXXXXX")
trap 'rm -rf "$out"' EXIT
"$@" "$driver" "$fixtures/$name.onnx" "$fixtures/${name}_batches.pt" "$out/trained.pt" "$loss" \
  "$devices" "$microbatches" 0.1
"$python" "$here/check_training.py" "$name" "$out/trained.pt"
