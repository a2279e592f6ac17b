# cmake -DCMD="prog;args" -DSTATUS=N [-DMATCH=regex] -P expect_exit.cmake
# Runs CMD and fails unless it exits with STATUS and (when given) its output matches MATCH.
execute_process(COMMAND ${CMD} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 120)
if(NOT rc STREQUAL "${STATUS}")
  message(FATAL_ERROR "expected exit status ${STATUS}, got ${rc}\nstdout:\n${out}\nstderr:\n${err}")
endif()
if(DEFINED MATCH AND NOT "${out}${err}" MATCHES "${MATCH}")
  message(FATAL_ERROR "output does not match '${MATCH}'\nstdout:\n${out}\nstderr:\n${err}")
endif()
