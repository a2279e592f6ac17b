# cmake -DCMD="prog;args" -DFILE=path -DMATCH=regex -P write_fails.cmake
# Runs CMD where no file may grow beyond 512 bytes (sh's ulimit -f 1, SIGXFSZ ignored, so a
# write fails with EFBIG as on a full disk) and expects what a failed output write must give:
# status 1, a message matching MATCH, and neither FILE nor a temporary file next to it.
get_filename_component(folder ${FILE} DIRECTORY)
get_filename_component(name ${FILE} NAME)
file(REMOVE ${FILE})
execute_process(COMMAND sh -c "trap '' XFSZ; ulimit -f 1 && exec \"$@\"" sh ${CMD}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 150)
if(NOT rc STREQUAL "1")
  message(FATAL_ERROR "expected exit status 1, got ${rc}\nstdout:\n${out}\nstderr:\n${err}")
endif()
if(NOT "${out}${err}" MATCHES "${MATCH}")
  message(FATAL_ERROR "output does not match '${MATCH}'\nstdout:\n${out}\nstderr:\n${err}")
endif()
file(GLOB left ${FILE} ${folder}/.${name}.*)
if(left)
  message(FATAL_ERROR "a failed write left ${left}")
endif()
