# cmake -DKEY=test_accuracy -DCMD0="prog;args" -DCMD1="prog;args" [-DCMD2=... up to CMD19]
#       -P same_metric.cmake
# Runs CMD0, CMD1, ... in order; each must exit with status 0. Every command whose output has a
# line "result: ... KEY=value" must print the same value (the text, so the same rounding), and
# at least two must print one: e.g. a training run's own evaluation and `tandem eval` of its
# checkpoint on other device layouts. Commands without a result line (consolidate) only prepare.
set(reference "")
set(compared 0)
include(${CMAKE_CURRENT_LIST_DIR}/run_ok.cmake)
foreach(i RANGE 19)
  if(NOT DEFINED CMD${i})
    break()
  endif()
  run_ok("${CMD${i}}")
  if(NOT out MATCHES "result:[^\n]* ${KEY}=([^ \n]+)")
    if(out MATCHES "result:[^\n]* test_")
      message(FATAL_ERROR "'${shown}' prints a held-out metric other than ${KEY}:\n${out}")
    endif()
    continue()
  endif()
  set(value "${CMAKE_MATCH_1}")
  message(STATUS "${KEY}=${value} from '${shown}'")
  math(EXPR compared "${compared} + 1")
  if(reference STREQUAL "")
    set(reference "${value}")
    set(reference_command "${shown}")
  elseif(NOT value STREQUAL reference)
    message(FATAL_ERROR "'${shown}' gives ${KEY}=${value}, but '${reference_command}' gave "
                        "${reference}\nstdout:\n${out}\nstderr:\n${err}")
  endif()
endforeach()
if(compared LESS 2)
  message(FATAL_ERROR "only ${compared} command(s) printed ${KEY}: nothing was compared")
endif()
