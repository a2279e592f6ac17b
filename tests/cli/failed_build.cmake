# cmake -DSOURCE=dir -DDIR=folder -P failed_build.cmake
# `make build` whose configure fails (a compiler that cannot compile) must fail and remove the
# program an earlier build left in DIR, saying so: the older program would otherwise run the
# older code in its place. The set-up step runs first and installs nothing on a set-up machine.
file(REMOVE_RECURSE ${DIR})
file(MAKE_DIRECTORY ${DIR})
file(WRITE ${DIR}/tandem "an older build\n")
# Without the make that runs the suite (make test): its flags and job server are not this one's.
execute_process(COMMAND env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL
                        make -C ${SOURCE} build BUILD=${DIR} JOBS=1
                        CMAKE_FLAGS=-DCMAKE_CXX_COMPILER=/bin/false
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 300)
if(rc STREQUAL "0")
  message(FATAL_ERROR "make build succeeded with a compiler that cannot compile:\n${out}\n${err}")
endif()
if(EXISTS ${DIR}/tandem)
  message(FATAL_ERROR "the failed build left the older ${DIR}/tandem in place:\n${out}\n${err}")
endif()
if(NOT err MATCHES "the set-up or build failed; ${DIR}/tandem is removed")
  message(FATAL_ERROR "the failed build did not say that it removed ${DIR}/tandem:\n${err}")
endif()
file(REMOVE_RECURSE ${DIR})
message(STATUS "make build failed and removed the older program")
