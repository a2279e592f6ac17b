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
  errors_of_medians
}

# errors_of_medians: time_err and peak_err from pred_ms, meas_ms, pred_peak and meas_peak.
errors_of_medians() {
  time_err=$(awk -v p="$pred_ms" -v m="$meas_ms" 'BEGIN { printf "%+.1f", 100 * (p - m) / m }')
  peak_err=$(awk -v p="${pred_peak% *}" -v m="${meas_peak% *}" -v pu="${pred_peak#* }" \
    -v mu="${meas_peak#* }" 'function b(v, u) { return v * (u == "KiB" ? 1024 : u == "MiB" ? 1048576 : 1073741824) }
    BEGIN { printf "%+.1f", 100 * (b(p, pu) - b(m, mu)) / b(m, mu) }')
}

# error_summary NOUN ERRORS...: "N NOUN: step time error median M%, worst W%; peak error from A%
# to B%" over "time_err peak_err" pairs.
error_summary() {
  local noun=$1 times n median worst peaks
  shift
  times=$(printf '%s\n' "$@" | awk '{ printf "%.1f\n", ($1 < 0 ? -$1 : $1) }' | sort -g)
  n=$(wc -l <<<"$times")
  median=$(awk -v n="$n" '{ v[NR] = $1 } END { print n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2 }' <<<"$times")
  worst=$(tail -1 <<<"$times")
  peaks=$(printf '%s\n' "$@" | awk '{ print $2 }' | sort -g)
  echo "$n $noun: step time error median ${median}%, worst ${worst}%; peak error from $(head -1 <<<"$peaks")% to $(tail -1 <<<"$peaks")%"
}

# samples_per_s SETTING MS: the setting's global batch (its --batch times its --replicas) over
# MS milliseconds.
samples_per_s() {
  local -n setting_args=$1
  local batch replicas
  batch=$(grep -o -- '--batch [0-9]*' <<<"${setting_args[*]}" | cut -d' ' -f2)
  replicas=$(grep -o -- '--replicas [0-9]*' <<<"${setting_args[*]}" | cut -d' ' -f2)
  awk -v ms="$2" -v b="$batch" -v r="${replicas:-1}" 'BEGIN { printf "%.2f", b * r / (ms / 1000) }'
}

# The sweep's configurations, each a setting and the options given to `train --auto`
# (add_config SETTING FLAGS...).
sweep_settings=()
sweep_flags=()
add_config() {
  sweep_settings+=("$1")
  shift
  sweep_flags+=("$*")
}

# run_sweep TRAIN: every configuration of add_config, in $planner_runs passes (default 3), each
# pass running every configuration once through the function TRAIN SETTING FLAGS... (which
# leaves its output in `out`). One run says little on a shared machine: one configuration's runs
# measured 611 to 870 ms a step in one afternoon, while its plans stayed within 2% of each
# other. The first pass lets the planner choose the split; the later ones run that split
# (--spatial 1 added where the flags leave it out, so that no run searches). A pass runs every
# configuration before the next pass, so that a slow moment of the machine weighs on one run of
# many configurations rather than on every run of one. Sets
#   sweep_rows    one table row per configuration: the medians of its predicted and measured
#                 steps and peaks (the range of its runs in parentheses) and their errors; a
#                 configuration that fails in any pass gets a row that says so
#   sweep_errors  "time_err peak_err" of those medians, per configuration
#   run_errors    "time_err peak_err" of every run against its own plan
#   best_sps / best_flags (associative, per setting): the fastest configuration's median
#                 samples/s and flags
sweep_rows=()
sweep_errors=()
run_errors=()
declare -A best_sps best_flags
run_sweep() {
  local train_fn=$1 runs=${planner_runs:-3} r i flags
  local -a chosen failed preds meas pred_peaks meas_peaks
  for ((r = 0; r < runs; ++r)); do
    for i in "${!sweep_settings[@]}"; do
      [ -n "${failed[$i]:-}" ] && continue
      flags=${sweep_flags[$i]}
      if ((r > 0)); then
        flags=${chosen[$i]}
        [[ $flags == *--spatial* ]] || flags="--spatial 1 $flags"
      fi
      # shellcheck disable=SC2086 # the flags are words
      "$train_fn" "${sweep_settings[$i]}" $flags || { failed[$i]=$(tail -1 <<<"$out"); continue; }
      parse_auto "$out"
      ((r > 0)) || chosen[$i]=$auto
      preds[$i]+=" $pred_ms"
      meas[$i]+=" $meas_ms"
      pred_peaks[$i]+=" ${pred_peak// /_}"
      meas_peaks[$i]+=" ${meas_peak// /_}"
      run_errors+=("$time_err $peak_err")
    done
  done
  local p m pp mp steady
  for i in "${!sweep_settings[@]}"; do
    if [ -n "${failed[$i]:-}" ]; then
      sweep_rows+=("| ${sweep_settings[$i]} | ${sweep_flags[$i]} | failed: ${failed[$i]} |")
      continue
    fi
    # shellcheck disable=SC2086 # the runs' numbers are words
    p=$(median_of ${preds[$i]})
    # shellcheck disable=SC2086
    m=$(median_of ${meas[$i]})
    # shellcheck disable=SC2086
    pp=$(median_of_sizes ${pred_peaks[$i]})
    # shellcheck disable=SC2086
    mp=$(median_of_sizes ${meas_peaks[$i]})
    pred_ms=$p meas_ms=$m pred_peak=$pp meas_peak=$mp
    errors_of_medians
    sweep_rows+=("| ${sweep_settings[$i]} | ${chosen[$i]} | $p ($(range_of ${preds[$i]})) | $m ($(range_of ${meas[$i]})) | $time_err | $pp | $mp | $peak_err |")
    sweep_errors+=("$time_err $peak_err")
    steady=$(samples_per_s "${sweep_settings[$i]}" "$m")
    if awk -v a="$steady" -v b="${best_sps[${sweep_settings[$i]}]:-0}" 'BEGIN { exit !(a > b) }'; then
      best_sps[${sweep_settings[$i]}]=$steady
      best_flags[${sweep_settings[$i]}]=${chosen[$i]}
    fi
  done
}

# range_of NUMBERS...: "least-most".
range_of() {
  printf '%s\n' "$@" | sort -g | awk 'NR == 1 { a = $1 } { b = $1 } END { print a "-" b }'
}

# median_of_sizes SIZES...: the median of sizes written "12.3_MiB", as "12.3 MiB" (of an even
# count, the smaller of the middle two).
median_of_sizes() {
  printf '%s\n' "$@" | awk -F_ '{ u = $2; f = u == "KiB" ? 1024 : u == "MiB" ? 1048576 : 1073741824
    print $1 * f, $1 " " u }' | sort -g | awk '{ v[NR] = $2 " " $3 } END { print v[int((NR + 1) / 2)] }'
}

# sweep_tables: the table of run_sweep's configurations, the summaries of its errors (of the
# medians, and of every run against its own plan), and the header of the --auto table.
sweep_tables() {
  echo "| setting | configuration (the planner's split) | predicted ms/step: median (range) | measured ms/step: median (range) | time error % | predicted peak | measured peak | peak error % |"
  echo "|---|---|---|---|---|---|---|---|"
  printf '%s\n' "${sweep_rows[@]}"
  echo
  echo "Medians of ${planner_runs:-3} runs: $(error_summary configurations "${sweep_errors[@]}")"
  echo
  echo "Every run against its own plan: $(error_summary runs "${run_errors[@]}")"
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
