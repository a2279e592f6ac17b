# Sourced by bench/planner.sh and bench/planner_mpi.sh. parse_auto OUT reads the output of a
# `train --auto` run (in process, or under mpirun with rank prefixes) and sets
#   auto       the flags it chose          took       seconds its costs took to measure
#   pred_ms    the predicted step          meas_ms    the measured step (median after the first)
#   pred_peak  the predicted peak          meas_peak  the measured peak of the fullest device
#   time_err   (predicted - measured) / measured in %, and peak_err the same for the peaks.
parse_auto() {
  local out=$1 line
  line=$(grep -E '^(\[r[0-9]+/[0-9]+\] )?auto: predicted' <<<"$out")
  pred_ms=$(sed -n 's/.*predicted \([0-9.]*\) ms.*/\1/p' <<<"$line")
  pred_peak=$(sed -n 's/.*ms per step and \([0-9.]* [KMG]iB\) (at most.*/\1/p' <<<"$line")
  meas_ms=$(sed -n 's/.*measured \([0-9.]*\) ms.*/\1/p' <<<"$line")
  meas_peak=$(sed -n 's/.*) and \([0-9.]* [KMG]iB\)$/\1/p' <<<"$line")
  auto=$(sed -n -E 's/^(\[r[0-9]+\/[0-9]+\] )?auto: chose .*\): (.*); predicted.*/\2/p' <<<"$out")
  took=$(sed -n -E 's/^(\[r[0-9]+\/[0-9]+\] )?auto: chose .*\(costs measured in ([0-9.]*) s\).*/\2/p' <<<"$out")
  time_err=$(awk -v p="$pred_ms" -v m="$meas_ms" 'BEGIN { printf "%+.1f", 100 * (p - m) / m }')
  peak_err=$(awk -v p="${pred_peak% *}" -v m="${meas_peak% *}" -v pu="${pred_peak#* }" \
    -v mu="${meas_peak#* }" 'function b(v, u) { return v * (u == "KiB" ? 1024 : u == "MiB" ? 1048576 : 1073741824) }
    BEGIN { printf "%+.1f", 100 * (b(p, pu) - b(m, mu)) / b(m, mu) }')
}

# error_summary ERRORS...: "N configurations: step time error median M%, worst W%; peak error
# from A% to B%" over "time_err peak_err" pairs.
error_summary() {
  local times n median worst peaks
  times=$(printf '%s\n' "$@" | awk '{ printf "%.1f\n", ($1 < 0 ? -$1 : $1) }' | sort -g)
  n=$(wc -l <<<"$times")
  median=$(awk -v n="$n" '{ v[NR] = $1 } END { print n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2 }' <<<"$times")
  worst=$(tail -1 <<<"$times")
  peaks=$(printf '%s\n' "$@" | awk '{ print $2 }' | sort -g)
  echo "$n configurations: step time error median ${median}%, worst ${worst}%; peak error from $(head -1 <<<"$peaks")% to $(tail -1 <<<"$peaks")%"
}

# sweep_tables ROWS_NAME ERRORS_NAME: the sweep's table of configurations (the array ROWS_NAME),
# the summary of its errors (the array ERRORS_NAME), and the header of the --auto table.
sweep_tables() {
  local -n sweep_rows=$1 sweep_errors=$2
  echo "| setting | configuration (the planner's split) | predicted ms/step | measured ms/step | time error % | predicted peak | measured peak | peak error % |"
  echo "|---|---|---|---|---|---|---|---|"
  printf '%s\n' "${sweep_rows[@]}"
  echo
  error_summary "${sweep_errors[@]}"
  echo
  echo "| setting | --auto chose | its samples/s (steps after the first) | best of the sweep | samples/s | ratio | the two in turn, ${choice_rounds:-3} runs each: medians' ratio | planner's own time | one step |"
  echo "|---|---|---|---|---|---|---|---|---|"
}

# in_turn TRAIN SETTING CHOSEN BEST: one run's ratio says little on a shared machine (one
# configuration measured 40.2 and 28.6 samples/s in two sweeps), so --auto's choice (the flags
# CHOSEN) and the sweep's best (BEST) run in turn, $choice_rounds times each (default 3), each
# through the function TRAIN SETTING FLAGS..., which leaves its output in `out`; --spatial 1 is
# added where the flags leave it out, so that no run searches. Sets in_turn_ratio to the ratio of
# the medians of their measured steps (best / chosen: the chosen's samples/s against the best's).
in_turn() {
  local train_fn=$1 setting=$2 chosen=$3 best=$4 r which flags
  local chosen_ms=() best_ms=()
  for ((r = 0; r < ${choice_rounds:-3}; ++r)); do
    for which in chosen best; do
      if [ "$which" = chosen ]; then flags=$chosen; else flags=$best; fi
      [[ $flags == *--spatial* ]] || flags="--spatial 1 $flags"
      # shellcheck disable=SC2086 # the flags are words
      "$train_fn" "$setting" $flags || { in_turn_ratio="failed: $(tail -1 <<<"$out")"; return; }
      parse_auto "$out"
      if [ "$which" = chosen ]; then chosen_ms+=("$meas_ms"); else best_ms+=("$meas_ms"); fi
    done
  done
  in_turn_ratio=$(awk -v c="$(median_of "${chosen_ms[@]}")" -v b="$(median_of "${best_ms[@]}")" \
    'BEGIN { printf "%.2f", b / c }')
}

# median_of NUMBERS...: their median.
median_of() {
  printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# The sweeps' steps per configuration. The plan is of a step in steady state, and a run's first
# steps are not: they fault in fresh pages until the process's heaps hold every tensor of a step
# (the mlp's backwards faulted 34575 pages in the first step, 13667 in the second, 825 a step
# after). With 9 steps the median of the 8 after the first leaves out two slow steps; with 5, the
# median of 4 takes one in.
planner_steps=9
