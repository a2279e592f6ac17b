# cmake -DCMD0="prog;args" [-DCMD1=... up to CMD19] -DSAME="a.pt;b.pt[;...]"
#       [-DDIFFERENT="a.pt;c.pt"] -DKEY=test_accuracy -P same_weights.cmake
# Runs CMD0, CMD1, ... in order (each must exit with status 0; `tandem consolidate` commands
# among them write the state dicts), then fails unless every file in SAME is byte for byte the
# first one: the same parameters, since consolidate writes the tensors of one model in model
# order. DIFFERENT names a pair that must differ, the control that shows the comparison can
# tell the runs apart (e.g. the checkpoint a run resumed from against the end of the run).
# KEY: every command whose result line has KEY must print the same value, and at least two
# must (same_metric.cmake).
include(${CMAKE_CURRENT_LIST_DIR}/same_metric.cmake)  # runs the commands, compares KEY

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
