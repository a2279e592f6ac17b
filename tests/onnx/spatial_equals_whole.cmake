# cmake -DTANDEM=path -DPYTHON=python3 -DMODEL=unet3d.onnx -DDIR=folder [-DMPIRUN="mpirun;args"]
#       [-DRUNS="s2;staged"] -P spatial_equals_whole.cmake
# A PyTorch U-Net from ONNX (instance norm, pooling, transposed convolution, a skip; Dice + BCE)
# trained 3 steps on whole samples on one device, and with every sample cut into depth slabs:
#   s2        --spatial 2 on 2 devices
#   staged    --spatial 2 --stages 2 on 4 devices (slab i of one stage to slab i of the next)
#   zb        the same under ZB-H1 (split backward) with --recompute stage
#   mpi       --spatial 2 on 2 MPI ranks (when MPIRUN is given)
# (RUNS: those of them to run; all by default.)
# Each consolidated result must equal the whole run's within 1e-5 of each tensor's largest
# magnitude (the slabs sum each weight gradient and each instance norm statistic in another
# order, so bits are not promised), and every run must print the same last loss (4 digits).
# Plain SGD: a convolution's bias before an instance norm has a gradient of rounding noise only
# (the norm removes it), which Adam would blow up to full steps of noise.
# Control: the whole run's step-2 checkpoint must not pass the comparison.
cmake_policy(SET CMP0057 NEW)  # if(... IN_LIST ...)
file(REMOVE_RECURSE ${DIR})
set(common train --model ${MODEL} --data spheres --volume 8 --loss dice+bce --batch 4
           --microbatches 2 --train-samples 12 --test-samples 4 --progress none --seed 0
           --optimizer sgd --momentum 0 --lr 1 --lr-schedule constant --steps 3)

set(loss "")
function(run name)
  string(REPLACE ";" " " shown "${ARGN}")
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err
                  TIMEOUT 200)
  if(NOT rc STREQUAL "0")
    message(FATAL_ERROR "'${shown}' exited with ${rc}\nstdout:\n${out}\nstderr:\n${err}")
  endif()
  if(NOT out MATCHES "result: steps=3 loss=([0-9.]+) test_dice=[0-9.]+ ")
    message(FATAL_ERROR "'${shown}' printed no loss and test_dice:\n${out}")
  endif()
  message(STATUS "${shown}: loss=${CMAKE_MATCH_1}")
  if(loss STREQUAL "")
    set(loss "${CMAKE_MATCH_1}" PARENT_SCOPE)
  elseif(NOT loss STREQUAL CMAKE_MATCH_1)
    message(FATAL_ERROR "'${shown}' ends with loss=${CMAKE_MATCH_1}, the whole run with ${loss}")
  endif()
  execute_process(COMMAND ${TANDEM} consolidate ${DIR}/${name} -o ${DIR}/${name}.pt
                  RESULT_VARIABLE rc OUTPUT_QUIET ERROR_VARIABLE err)
  if(NOT rc STREQUAL "0")
    message(FATAL_ERROR "consolidate ${DIR}/${name}: ${err}")
  endif()
endfunction()

function(compare a b expect_close)
  execute_process(COMMAND ${PYTHON} ${CMAKE_CURRENT_LIST_DIR}/../cli/close_weights.py
                          ${DIR}/${a}.pt ${DIR}/${b}.pt 1e-5
                  RESULT_VARIABLE differ OUTPUT_VARIABLE out ERROR_VARIABLE err)
  message(STATUS "${a} against ${b}: ${out}${err}")
  if(expect_close AND differ)
    message(FATAL_ERROR "the parameters of ${a} and ${b} differ: ${out}${err}")
  elseif(NOT expect_close AND NOT differ)
    message(FATAL_ERROR "${a} and ${b} agree: the comparison cannot tell 2 steps from 3")
  endif()
endfunction()

run(whole ${TANDEM} ${common} --devices 1 --save-dir ${DIR}/whole --save-every 1 --keep 0)
execute_process(COMMAND ${TANDEM} consolidate ${DIR}/whole/step-2 -o ${DIR}/whole2.pt
                RESULT_VARIABLE rc)
if(NOT DEFINED RUNS)
  set(RUNS s2 staged zb mpi)
endif()
compare(whole whole2 FALSE)
if(s2 IN_LIST RUNS)
  run(s2 ${TANDEM} ${common} --devices 2 --spatial 2 --save-dir ${DIR}/s2)
  compare(whole s2 TRUE)
endif()
if(staged IN_LIST RUNS)
  run(staged ${TANDEM} ${common} --devices 4 --spatial 2 --stages 2 --save-dir ${DIR}/staged)
  compare(whole staged TRUE)
endif()
if(zb IN_LIST RUNS)
  run(zb ${TANDEM} ${common} --devices 4 --spatial 2 --stages 2 --schedule zb-h1
      --recompute stage --save-dir ${DIR}/zb)
  compare(whole zb TRUE)
endif()
if(MPIRUN AND mpi IN_LIST RUNS)
  run(mpi ${MPIRUN} -n 2 ${TANDEM} ${common} --spatial 2 --save-dir ${DIR}/mpi)
  compare(whole mpi TRUE)
endif()
