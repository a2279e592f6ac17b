# cmake -DCMD0="prog;args" [-DCMD1=... up to CMD19] -DSAME="a.pt;b.pt[;...]"
#       [-DDIFFERENT="a.pt;c.pt"] [-DKEY=test_accuracy] -P same_weights.cmake
# Runs CMD0, CMD1, ... in order (each must exit with status 0; `tandem consolidate` commands
# among them write the state dicts), then fails unless every file in SAME is byte for byte the
# first one: the same parameters, since consolidate writes the tensors of one model in model
# order. DIFFERENT names a pair that must differ, the control that shows the comparison can
# tell the runs apart (e.g. the checkpoint a run resumed from against the end of the run).
# KEY: every command whose result line has KEY must print the same value, at least two must.
set(reference "")
set(compared 0)
include(${CMAKE_CURRENT_LIST_DIR}/run_ok.cmake)
foreach(i RANGE 19)
  if(NOT DEFINED CMD${i})
    break()
  endif()
  run_ok("${CMD${i}}")
  message(STATUS "${shown}\n${out}")
  if(NOT DEFINED KEY OR NOT out MATCHES "result:[^\n]* ${KEY}=([^ \n]+)")
    continue()
  endif()
  math(EXPR compared "${compared} + 1")
  if(reference STREQUAL "")
    set(reference "${CMAKE_MATCH_1}")
    set(reference_command "${shown}")
  elseif(NOT CMAKE_MATCH_1 STREQUAL reference)
    message(FATAL_ERROR "'${shown}' gives ${KEY}=${CMAKE_MATCH_1}, but '${reference_command}' "
                        "gave ${reference}")
  endif()
endforeach()
if(DEFINED KEY AND compared LESS 2)
  message(FATAL_ERROR "only ${compared} command(s) printed ${KEY}: nothing was compared")
endif()

list(GET SAME 0 first)
list(LENGTH SAME n)
if(n LESS 2)
  message(FATAL_ERROR "SAME names ${n} file(s): nothing to compare")
endif()
foreach(file IN LISTS SAME)
  execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files ${first} ${file}
                  RESULT_VARIABLE differ)
  if(differ)
    message(FATAL_ERROR "the parameters in ${file} differ from those in ${first}")
  endif()
endforeach()
if(DEFINED DIFFERENT)
  list(GET DIFFERENT 0 a)
  list(GET DIFFERENT 1 b)
  execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files ${a} ${b} RESULT_VARIABLE differ)
  if(NOT differ)
    message(FATAL_ERROR "${a} and ${b} are equal: the comparison cannot tell these runs apart")
  endif()
endif()
message(STATUS "byte for byte equal: ${SAME}")
