# cmake -DMPIRUN="mpirun;flags" -DTANDEM=path -DDIR=folder -P mpi_plan.cmake
# The planner under mpirun:
#  - `tandem plan` on 2 ranks measures the messages between them and prints the chosen layout as
#    an mpirun command line of 2 ranks (and writes the ranks in its JSON);
#  - `train --auto` with --stages 1 on 2 ranks can only choose --spatial 2, which the job's
#    transport must take after the choice (the job starts without slab groups); it trains the
#    weights that the chosen flags given by hand train, bit for bit;
#  - on 4 ranks with --replicas 2 the plan measures the gradients' sums over the replicas and
#    keeps --replicas 2 in its command line.
include(${CMAKE_CURRENT_LIST_DIR}/run_ok.cmake)
file(REMOVE_RECURSE ${DIR})
file(MAKE_DIRECTORY ${DIR})
set(unet --model unet3d --levels 2 --filters 4 --data spheres --volume 16 --batch 2
         --train-samples 2 --test-samples 2 --seed 3 --comm-timeout 60 --threads-per-device 1)

run_ok("${MPIRUN};-n;2;${TANDEM};plan;${unet};--repeats;1;--top;3;--json;${DIR}/plan.json")
if(NOT out MATCHES "messages between 2 ranks over MPI: an exchange waits"
   OR NOT out MATCHES "chosen: mpirun -n 2 tandem train ")
  message(FATAL_ERROR "'${shown}' does not plan for 2 ranks:\n${out}\n${err}")
endif()
file(READ ${DIR}/plan.json json)
string(JSON ranks GET "${json}" ranks)
string(JSON where GET "${json}" transport)
if(NOT ranks EQUAL 2 OR NOT where STREQUAL "between 2 ranks over MPI")
  message(FATAL_ERROR "the JSON plan says ranks ${ranks}, transport '${where}'")
endif()

set(fixed --stages 1 --schedule 1f1b --microbatches 2 --recompute none --precision fp32
          --steps 2 --progress none)
run_ok("${MPIRUN};-n;2;${TANDEM};train;${unet};${fixed};--auto")
if(NOT out MATCHES "auto: chose [^\n]*: --spatial 2 --schedule 1f1b")
  message(FATAL_ERROR "'${shown}' did not choose --spatial 2:\n${out}\n${err}")
endif()
if(NOT out MATCHES "weights=([0-9a-f]+)")
  message(FATAL_ERROR "'${shown}' printed no weights:\n${out}")
endif()
set(chosen ${CMAKE_MATCH_1})
run_ok("${MPIRUN};-n;2;${TANDEM};train;${unet};${fixed};--spatial;2")
if(NOT out MATCHES "weights=${chosen}")
  message(FATAL_ERROR "--auto trained weights ${chosen}; its flags by hand:\n${out}")
endif()
message(STATUS "--auto and --spatial 2 by hand: weights ${chosen}")

set(mlp --model mlp --width 64 --batch 8 --train-samples 64 --test-samples 16 --replicas 2
        --comm-timeout 60 --threads-per-device 1)
run_ok("${MPIRUN};-n;4;${TANDEM};plan;${mlp};--repeats;1;--top;3")
if(NOT out MATCHES "gradient sums over 2 ranks: 64.0 KiB in [0-9]+ us"
   OR NOT out MATCHES "chosen: mpirun -n 4 tandem train [^\n]*--replicas 2")
  message(FATAL_ERROR "'${shown}' does not plan the replicas' sums:\n${out}\n${err}")
endif()
