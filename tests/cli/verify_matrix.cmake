# cmake -DTANDEM=path -P verify_matrix.cmake
# tandem verify over the configurations the equivalence tests train (tests/runtime,
# tests/spatial): every schedule on 2 and 4 stages with and without recomputation, uneven
# micro-batches and partitions, slabs alone and under stages (2, 3 and 4 slabs, split backward,
# recomputation), the Conv3D stack on slabs. Every one must exit 0; the script prints each
# configuration's largest difference against its tolerance and, last, the configuration closest
# to its tolerance (the faults of verify.cmake land far above theirs).
set(mlp verify --model mlp --width 32 --blocks 2 --batch 32 --microbatches 4)
set(mlp_batch verify --model mlp --width 32 --blocks 2)
set(unet verify --model unet3d --levels 2 --filters 4 --data spheres --volume 16 --batch 4
    --train-samples 8 --test-samples 0 --microbatches 2)
set(stack verify --model conv3d-stack --convs 4 --filters 4 --data regression --volume 12
    --batch 4 --train-samples 8 --test-samples 0 --microbatches 2)

set(configs "")
foreach(schedule 1f1b gpipe sequential zb-h1)
  foreach(devices 2 4)
    foreach(recompute none stage)
      list(APPEND configs "mlp|--schedule ${schedule} --devices ${devices} --recompute ${recompute}")
    endforeach()
  endforeach()
endforeach()
foreach(recompute none stage)
  list(APPEND configs
       "mlp|--schedule interleaved --virtual-stages 2 --devices 2 --recompute ${recompute}"
       "mlp|--schedule zb-v --devices 2 --recompute ${recompute}")
endforeach()
list(APPEND configs
     "mlp|--devices 4 --balance 1,2,2,3"
     "mlp_batch|--devices 3 --partition memory --batch 30 --microbatches 4"
     "mlp_batch|--devices 2 --batch 30 --microbatches 7 --schedule gpipe"
     "unet|--devices 2 --spatial 2"
     "unet|--devices 3 --spatial 3 --schedule gpipe"
     "unet|--devices 4 --spatial 4"
     "unet|--devices 4 --spatial 2 --schedule zb-h1"
     "unet|--devices 4 --spatial 2 --recompute stage"
     "unet|--devices 4 --stages 4"
     "stack|--devices 2 --spatial 2"
     "stack|--devices 4 --spatial 2 --schedule zb-h1 --recompute stage")

set(worst "")
set(failed "")
foreach(config ${configs})
  string(REPLACE "|" ";" parts "${config}")
  list(GET parts 0 model)
  list(GET parts 1 options)
  separate_arguments(options UNIX_COMMAND "${options}")
  execute_process(COMMAND ${TANDEM} ${${model}} ${options}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 120)
  string(REPLACE ";" " " shown "${model} ${options}")
  if(NOT rc STREQUAL "0" OR
     NOT out MATCHES "result: verified parameters=[0-9]+ steps=1 largest_difference=([0-9.e+-]+) tolerance=([0-9.e+-]+)")
    string(REGEX MATCH "result:[^\n]*" result "${out}")
    list(APPEND failed "${shown}: status ${rc}, ${result}${err}")
    continue()
  endif()
  set(difference ${CMAKE_MATCH_1})
  set(tolerance ${CMAKE_MATCH_2})
  message(STATUS "${shown}: largest difference ${difference}, tolerance ${tolerance}")
  # The margin's order of magnitude from the exponents (cmake has no logarithm).
  string(REGEX MATCH "e([+-][0-9]+)$" d_exp "${difference}")
  set(d_exp ${CMAKE_MATCH_1})
  string(REGEX MATCH "e([+-][0-9]+)$" t_exp "${tolerance}")
  set(t_exp ${CMAKE_MATCH_1})
  if(d_exp STREQUAL "")
    continue()  # a difference of 0
  endif()
  math(EXPR margin "${t_exp} - (${d_exp})")
  if(worst STREQUAL "" OR margin LESS worst)
    set(worst ${margin})
    set(worst_config "${shown} (${difference} against ${tolerance})")
  endif()
endforeach()
list(LENGTH configs n)
if(failed)
  string(REPLACE ";" "\n" failed "${failed}")
  message(FATAL_ERROR "tandem verify did not verify these correct configurations:\n${failed}")
endif()
message(STATUS "${n} configurations verified; the closest to its tolerance: ${worst_config}, "
               "${worst} orders of magnitude apart by their exponents")
