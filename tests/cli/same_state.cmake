# cmake -DTANDEM=path -DDIR=folder -DCMD0="prog;train;args" -DCMD1="prog;train;args" [... CMD9]
#       [-DLOAD=ON] -P same_state.cmake
# Runs `CMDi --save-dir DIR/runi` for each i in order (each must exit 0; a command may start
# with mpirun), consolidates each run's last checkpoint with `TANDEM consolidate` into
# DIR/runi.pt, and requires every file to be byte for byte DIR/run0.pt: the same weights, bit
# for bit, not a printed loss. Consolidate writes the tensors in model order, so equal values
# give equal files; each run's result line must also print run0's weights= fingerprint. With
# LOAD=ON, two busy processes (`stress --cpu 2`) run alongside the commands after the first, so
# that the later runs meet another timing than the first.
include(${CMAKE_CURRENT_LIST_DIR}/run_ok.cmake)
file(REMOVE_RECURSE ${DIR})
file(MAKE_DIRECTORY ${DIR})
set(runs 0)
foreach(i RANGE 9)
  if(NOT DEFINED CMD${i})
    break()
  endif()
  math(EXPR runs "${runs} + 1")
endforeach()
if(runs LESS 2)
  message(FATAL_ERROR "same_state.cmake needs at least two commands (CMD0, CMD1)")
endif()
math(EXPR last "${runs} - 1")
foreach(i RANGE ${last})
  if(i EQUAL 1 AND LOAD)
    # In a process group of its own, ended as a group below; stress also ends itself (and its
    # workers) after its timeout, should this script fail first.
    execute_process(COMMAND sh -c "setsid stress --cpu 2 --timeout 120 >/dev/null 2>&1 & echo $!"
                    OUTPUT_VARIABLE load_pid OUTPUT_STRIP_TRAILING_WHITESPACE)
  endif()
  run_ok("${CMD${i}};--save-dir;${DIR}/run${i}")
  message(STATUS "${shown}")
  if(NOT out MATCHES "result:[^\n]* weights=([0-9a-f]+)")
    message(FATAL_ERROR "'${shown}' printed no weights= in its result line:\n${out}")
  endif()
  set(weights${i} "${CMAKE_MATCH_1}")
  run_ok("${TANDEM};consolidate;${DIR}/run${i};-o;${DIR}/run${i}.pt")
endforeach()
if(load_pid)
  execute_process(COMMAND kill -- -${load_pid})
endif()
foreach(i RANGE 1 ${last})
  execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files ${DIR}/run0.pt ${DIR}/run${i}.pt
                  RESULT_VARIABLE differ)
  string(REPLACE ";" " " shown "${CMD${i}}")
  string(REPLACE ";" " " first "${CMD0}")
  if(differ)
    message(FATAL_ERROR "the weights of '${shown}' (${DIR}/run${i}.pt) differ from those of "
                        "'${first}' (${DIR}/run0.pt)")
  endif()
  if(NOT weights${i} STREQUAL weights0)
    message(FATAL_ERROR "'${shown}' printed weights=${weights${i}}, '${first}' weights=${weights0}, "
                        "although their state dicts are equal")
  endif()
endforeach()
message(STATUS "${runs} runs: consolidated weights byte for byte equal, weights=${weights0}")
