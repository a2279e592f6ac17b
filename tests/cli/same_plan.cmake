# cmake -DCMD0="prog;args" -DCMD1="prog;args" -P same_plan.cmake
# Runs both commands (each must exit with status 0) and fails unless both print a memory plan
# (`--partition memory`) and the rows of the two plans are the same text: the same layers per
# stage and the same predicted bytes.
set(plans "")
foreach(i 0 1)
  string(REPLACE ";" " " shown "${CMD${i}}")
  execute_process(COMMAND ${CMD${i}} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err
                  TIMEOUT 150)
  if(NOT rc STREQUAL "0")
    message(FATAL_ERROR "'${shown}' exited with ${rc}\nstdout:\n${out}\nstderr:\n${err}")
  endif()
  if(NOT out MATCHES "memory plan [^\n]*\n[^\n]*\n(([0-9]+ [^\n]*\n)+)")
    message(FATAL_ERROR "'${shown}' prints no memory plan:\n${out}")
  endif()
  set(plan${i} "${CMAKE_MATCH_1}")
  message(STATUS "'${shown}' plans:\n${CMAKE_MATCH_1}")
endforeach()
if(NOT plan0 STREQUAL plan1)
  message(FATAL_ERROR "the plans differ:\n${plan0}\nagainst\n${plan1}")
endif()
