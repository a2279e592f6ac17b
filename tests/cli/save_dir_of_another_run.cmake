# cmake -DTANDEM=prog -DDIR=folder -DCOMMON="args" -P save_dir_of_another_run.cmake
# A save folder that holds another run's checkpoints is not overwritten without a word:
#   1. run A (--width 32, 3 steps) saves step-1..3 into DIR;
#   2. run B (--width 64) with --save-dir DIR alone is refused with status 2, naming both ways
#      out, and DIR is as it was;
#   3. A resumed from DIR/step-2 with --save-dir DIR continues its own run;
#   4. B with --overwrite replaces A's checkpoints: DIR then holds B's step-1 and step-2 only
#      (A's step-3 is gone), which eval reads as a width-64 model.
include(${CMAKE_CURRENT_LIST_DIR}/run_ok.cmake)
file(REMOVE_RECURSE ${DIR})
set(a ${TANDEM};train;${COMMON};--width;32;--steps;3;--save-every;1;--save-dir;${DIR})
set(b ${TANDEM};train;${COMMON};--width;64;--steps;2;--save-every;1;--save-dir;${DIR})
function(checkpoints_are expected)
  file(GLOB found RELATIVE ${DIR} ${DIR}/*)
  list(SORT found)
  if(NOT "${found}" STREQUAL "${expected}")
    message(FATAL_ERROR "${DIR} holds '${found}', not '${expected}'")
  endif()
endfunction()

run_ok("${a}")
checkpoints_are("latest;step-1;step-2;step-3")
execute_process(COMMAND ${b} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 150)
string(CONCAT refusal "--save-dir ${DIR} holds checkpoints of another run \\(step-1, step-2, "
       "step-3\\); give --resume ${DIR} to continue that run, --overwrite to replace its "
       "checkpoints with this run's, or another --save-dir")
if(NOT rc STREQUAL "2" OR NOT "${err}" MATCHES "${refusal}" OR "${out}" MATCHES "result:")
  message(FATAL_ERROR "a new run into ${DIR} exited with ${rc}, not 2 with the refusal\n"
                      "stdout:\n${out}\nstderr:\n${err}")
endif()
checkpoints_are("latest;step-1;step-2;step-3")
run_ok("${TANDEM};train;${COMMON};--width;32;--steps;3;--save-every;1;--save-dir;${DIR};--resume;${DIR}/step-2")
checkpoints_are("latest;step-1;step-2;step-3")
run_ok("${b};--overwrite")
checkpoints_are("latest;step-1;step-2")
run_ok("${TANDEM};eval;--checkpoint;${DIR};--width;64;--batch;32;--microbatches;4;--eval-batch;5000;--seed;3")
