# cmake -DCMD0="prog;args" -DCMD1="prog;args" -P same_plan.cmake
# Runs both commands (each must exit with status 0) and fails unless both print a memory plan
# (`--partition memory`) and the rows of the two plans are the same text: the same layers per
# stage and the same predicted bytes.
include(${CMAKE_CURRENT_LIST_DIR}/run_ok.cmake)
foreach(i 0 1)
  run_ok("${CMD${i}}")
  if(NOT out MATCHES "memory plan [^\n]*\n[^\n]*\n(([0-9]+ [^\n]*\n)+)")
    message(FATAL_ERROR "'${shown}' prints no memory plan:\n${out}")
  endif()
  set(plan${i} "${CMAKE_MATCH_1}")
  message(STATUS "'${shown}' plans:\n${CMAKE_MATCH_1}")
endforeach()
if(NOT plan0 STREQUAL plan1)
  message(FATAL_ERROR "the plans differ:\n${plan0}\nagainst\n${plan1}")
endif()
