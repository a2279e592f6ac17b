# cmake -DTANDEM=path -DPYTHON=python3 -DDIR=folder -P spatial_resume.cmake
# A checkpoint saved by a spatial split resumes under another split, under pipeline stages and
# on one device. Runs (unet3d, 2 levels, 16^3, Adam, constant learning rate):
#   full      6 steps on one device
#   s4        3 steps with --spatial 4 on 4 devices, then --resume to step 6 with --spatial 2
#   staged    s4's step-3 checkpoint resumed on 2 devices as 2 pipeline stages
#   one       s4's step-3 checkpoint resumed on one device
# Each consolidated result must equal `full` within 1e-5 of each tensor's largest magnitude
# (measured: 7.5e-7; the slabs sum each weight gradient in another order than one device, so
# bits are not promised); the step-3 checkpoint must not (control: the comparison tells 3
# steps from 6).
file(REMOVE_RECURSE ${DIR})
set(common --model unet3d --data spheres --levels 2 --filters 4 --volume 16 --batch 4
           --microbatches 2 --progress none --dropout 0 --seed 0 --optimizer adam --lr 1e-3
           --lr-schedule constant --idle-cores keep)

function(run)
  string(REPLACE ";" " " shown "${ARGN}")
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err
                  TIMEOUT 150)
  if(NOT rc STREQUAL "0")
    message(FATAL_ERROR "'${shown}' exited with ${rc}\nstdout:\n${out}\nstderr:\n${err}")
  endif()
  message(STATUS "${shown}\n${out}")
endfunction()

function(compare a b expect_close)
  execute_process(COMMAND ${PYTHON} ${CMAKE_CURRENT_LIST_DIR}/close_weights.py ${a} ${b} 1e-5
                  RESULT_VARIABLE differ OUTPUT_VARIABLE out ERROR_VARIABLE err)
  message(STATUS "${a} against ${b}: ${out}${err}")
  if(expect_close AND differ)
    message(FATAL_ERROR "the parameters of '${a}' and '${b}' differ: ${out}${err}")
  elseif(NOT expect_close AND NOT differ)
    message(FATAL_ERROR "'${a}' and '${b}' agree: the comparison cannot tell 3 steps from 6")
  endif()
endfunction()

run(${TANDEM} train ${common} --devices 1 --steps 6 --save-dir ${DIR}/full)
run(${TANDEM} train ${common} --devices 4 --spatial 4 --steps 3 --save-dir ${DIR}/s4)
run(${TANDEM} train ${common} --devices 2 --stages 2 --steps 6 --resume ${DIR}/s4/step-3
    --save-dir ${DIR}/staged)
run(${TANDEM} train ${common} --devices 1 --steps 6 --resume ${DIR}/s4/step-3
    --save-dir ${DIR}/one)
run(${TANDEM} train ${common} --devices 2 --spatial 2 --steps 6 --resume ${DIR}/s4
    --save-dir ${DIR}/s4)
foreach(name full s4 staged one s4/step-3)
  string(REPLACE "/" "-" file ${name})
  run(${TANDEM} consolidate ${DIR}/${name} -o ${DIR}/${file}.pt)
endforeach()
compare(${DIR}/full.pt ${DIR}/s4.pt TRUE)
compare(${DIR}/full.pt ${DIR}/staged.pt TRUE)
compare(${DIR}/full.pt ${DIR}/one.pt TRUE)
compare(${DIR}/full.pt ${DIR}/s4-step-3.pt FALSE)
