# The examples as a user builds them: tandem installed into a temporary prefix (cmake --install),
# examples/ configured against it with find_package(tandem) only, then each run briefly:
#   seed_mlp     4 stages on 4 in-process devices, and under mpirun -n 4 (one stage per rank):
#                the same loss to the last bit; 2 replicas of them on 8 ranks; each also with
#                the model registered in the catalog: the same loss again
#   custom_unet  2 steps saved, then run again to 4: it resumes from its checkpoint; in process
#                and under mpirun -n 2
# and the snippets of docs/API.md compiled against the same installed headers.
# cmake -DSOURCE=... -DBUILD=... -DWORK=... [-DMPIRUN="mpirun|--oversubscribe|..."] -P this file
cmake_minimum_required(VERSION 3.18)
string(REPLACE "|" ";" MPIRUN "${MPIRUN}")
function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err
                  WORKING_DIRECTORY ${SOURCE})
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}):\n${out}\n${err}")
  endif()
  set(out "${out}" PARENT_SCOPE)
endfunction()

# The line `key=value` of `text` holding `marker`, and one value of it.
function(field text marker key var)
  string(REGEX MATCH "${marker}[^\n]*" line "${text}")
  string(REGEX MATCH "${key}=([^ \n]+)" found "${line}")
  if(NOT found)
    message(FATAL_ERROR "no ${key}= after '${marker}' in:\n${text}")
  endif()
  set(${var} "${CMAKE_MATCH_1}" PARENT_SCOPE)
endfunction()

file(REMOVE_RECURSE ${WORK})
run("cmake --install" ${CMAKE_COMMAND} --install ${BUILD} --prefix ${WORK}/prefix)
# Only the public API is installed: no header of the parts' internals.
file(GLOB_RECURSE installed RELATIVE ${WORK}/prefix/include ${WORK}/prefix/include/*.h)
foreach(internal tandem/mpi/wire.h tandem/mpi/mailbox.h tandem/schedule/lower.h)
  if(internal IN_LIST installed)
    message(FATAL_ERROR "the internal header ${internal} is installed")
  endif()
endforeach()
# The ```cpp snippets of docs/API.md, in order, as one file compiled with the examples.
file(READ ${SOURCE}/docs/API.md rest)
set(tour "")
while(TRUE)
  string(FIND "${rest}" "```cpp\n" start)
  if(start EQUAL -1)
    break()
  endif()
  math(EXPR start "${start} + 7")
  string(SUBSTRING "${rest}" ${start} -1 rest)
  string(FIND "${rest}" "```" end)
  string(SUBSTRING "${rest}" 0 ${end} block)
  string(APPEND tour "${block}\n")
  string(SUBSTRING "${rest}" ${end} -1 rest)
endwhile()
if(NOT tour MATCHES "train::Job job")
  message(FATAL_ERROR "docs/API.md: its snippets were not found")
endif()
file(WRITE ${WORK}/api_tour.cc "${tour}")
run("configuring examples/ against the installed tandem" ${CMAKE_COMMAND} -S ${SOURCE}/examples
    -B ${WORK}/build -DCMAKE_PREFIX_PATH=${WORK}/prefix -DCMAKE_BUILD_TYPE=Release
    -DAPI_TOUR=${WORK}/api_tour.cc)
run("building the examples" ${CMAKE_COMMAND} --build ${WORK}/build -j 2)

run("seed_mlp in process" ${WORK}/build/seed_mlp data/mnist 6)
field("${out}" "seed_mlp:" loss inprocess)
field("${out}" "seed_mlp:" steps steps)
if(NOT steps EQUAL 6)
  message(FATAL_ERROR "seed_mlp trained ${steps} steps, not 6:\n${out}")
endif()
# The same model registered in the catalog and chosen by name: the same bits.
run("seed_mlp from the catalog" ${WORK}/build/seed_mlp data/mnist 6 1 registered)
field("${out}" "seed_mlp:" loss catalog)
if(NOT catalog STREQUAL inprocess)
  message(FATAL_ERROR "seed_mlp: loss ${catalog} from the catalog, ${inprocess} given directly")
endif()
if(MPIRUN)
  run("seed_mlp under mpirun -n 4" ${MPIRUN} -n 4 ${WORK}/build/seed_mlp data/mnist 6)
  field("${out}" "seed_mlp:" loss ranks)
  if(NOT ranks STREQUAL inprocess)
    message(FATAL_ERROR "seed_mlp: loss ${ranks} on 4 ranks, ${inprocess} in process")
  endif()
  # 2 replicas of the 4 stages on 8 ranks: stages x replicas.
  run("seed_mlp under mpirun -n 8, 2 replicas" ${MPIRUN} -n 8 ${WORK}/build/seed_mlp data/mnist 6 2)
  field("${out}" "seed_mlp:" steps steps)
  field("${out}" "seed_mlp:" loss replicated)
  if(NOT steps EQUAL 6 OR replicated STREQUAL ranks OR replicated STREQUAL "nan")
    message(FATAL_ERROR "seed_mlp with 2 replicas: expected 6 steps on a batch of 128:\n${out}")
  endif()
  run("seed_mlp from the catalog, 2 replicas" ${MPIRUN} -n 8 ${WORK}/build/seed_mlp data/mnist 6 2
      registered)
  field("${out}" "seed_mlp:" loss catalog)
  if(NOT catalog STREQUAL replicated)
    message(FATAL_ERROR "seed_mlp, 2 replicas: loss ${catalog} from the catalog, ${replicated} "
                        "given directly")
  endif()
endif()

run("custom_unet, 2 steps" ${WORK}/build/custom_unet ${WORK}/unet 2)
field("${out}" "custom_unet:" steps steps)
if(NOT steps EQUAL 2 OR NOT out MATCHES "planned peaks fit")
  message(FATAL_ERROR "custom_unet: expected 2 steps and a memory plan that fits:\n${out}")
endif()
run("custom_unet resumed to 4 steps" ${WORK}/build/custom_unet ${WORK}/unet 4)
field("${out}" "custom_unet:" steps steps)
field("${out}" "custom_unet:" test_dice dice)
if(NOT steps EQUAL 4 OR NOT EXISTS ${WORK}/unet/step-4 OR dice STREQUAL "nan")
  message(FATAL_ERROR "custom_unet did not resume to step 4:\n${out}")
endif()
if(MPIRUN)
  run("custom_unet under mpirun -n 2" ${MPIRUN} -n 2 ${WORK}/build/custom_unet ${WORK}/unet_mpi 2)
  field("${out}" "custom_unet:" steps steps)
  if(NOT steps EQUAL 2)
    message(FATAL_ERROR "custom_unet under mpirun: expected 2 steps:\n${out}")
  endif()
endif()
file(REMOVE_RECURSE ${WORK})
