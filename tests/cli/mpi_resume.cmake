# cmake -DMPIRUN="mpirun;flags" -DTANDEM=path -DDIR=folder -P mpi_resume.cmake
# Bitwise resume under MPI. Three runs of one configuration on 2 ranks:
#   full         4 steps, uninterrupted, saved at the end
#   interrupted  stopped after 2 steps (--steps 2, saving each step), then --resume to step 4
#   moved        the interrupted run's step-2 checkpoint resumed in one process on 3 devices
# The consolidated parameters of `interrupted` and `moved` must be byte for byte those of
# `full`. Bitwise, not within a tolerance: the learning rate is constant (the schedule does not
# depend on --steps), every layer sees the same micro-batches with the same dropout masks in
# the same order whatever the partition and transport, and consolidate writes the tensors in
# model order, so equal values give equal files. Every device multiplies with one BLAS thread
# (a rank would otherwise take the machine's cores, and an in-process device its share), since
# some BLAS kernels round differently with another thread count. As a control, the step-2
# parameters differ.
file(REMOVE_RECURSE ${DIR})
set(common --batch 32 --microbatches 4 --eval-batch 5000 --progress none --seed 3
           --lr-schedule constant --comm-timeout 60 --threads-per-device 1 --idle-cores keep)

function(run)
  string(REPLACE ";" " " shown "${ARGN}")
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err
                  TIMEOUT 150)
  if(NOT rc STREQUAL "0")
    message(FATAL_ERROR "'${shown}' exited with ${rc}\nstdout:\n${out}\nstderr:\n${err}")
  endif()
  message(STATUS "${shown}\n${out}")
endfunction()

function(expect_same a b)
  execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files ${a} ${b} RESULT_VARIABLE differ)
  if(differ)
    message(FATAL_ERROR "the parameters of '${a}' and '${b}' differ")
  endif()
endfunction()

run(${MPIRUN} -n 2 ${TANDEM} train ${common} --steps 4 --save-dir ${DIR}/full)
run(${MPIRUN} -n 2 ${TANDEM} train ${common} --steps 2 --save-dir ${DIR}/interrupted
    --save-every 1 --keep 0)
run(${MPIRUN} -n 2 ${TANDEM} train ${common} --steps 4 --resume ${DIR}/interrupted
    --save-dir ${DIR}/interrupted --keep 0)
run(${TANDEM} train ${common} --steps 4 --devices 3 --transport inprocess
    --resume ${DIR}/interrupted/step-2 --save-dir ${DIR}/moved)
foreach(name full interrupted moved interrupted/step-2)
  string(REPLACE "/" "-" file ${name})
  run(${TANDEM} consolidate ${DIR}/${name} -o ${DIR}/${file}.pt)
endforeach()
expect_same(${DIR}/full.pt ${DIR}/interrupted.pt)
expect_same(${DIR}/full.pt ${DIR}/moved.pt)
execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files ${DIR}/full.pt
                        ${DIR}/interrupted-step-2.pt RESULT_VARIABLE differ)
if(NOT differ)
  message(FATAL_ERROR "the parameters after 2 and after 4 steps are equal: the comparison "
                      "cannot tell a resumed run from a stalled one")
endif()
message(STATUS "resumed under MPI and in process on 3 devices: parameters bitwise equal")
