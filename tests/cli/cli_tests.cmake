# The command line as a user meets it: outputs, exit statuses and messages.
set(expect ${CMAKE_CURRENT_LIST_DIR}/expect_exit.cmake)
# What the command writes (TensorBoard event files, SVG timelines, merged MPI traces) is read
# back by Python scripts with libraries that know nothing of tandem: the first interpreter that
# imports protobuf and crcmod (Debian's python3-protobuf and python3-crcmod, which scripts/setup
# installs; an interpreter earlier on PATH, e.g. pyenv's, may lack them), or TANDEM_PYTHON.
set(TANDEM_PYTHON "" CACHE FILEPATH "Python 3 for the command-line output checks")
set(tandem_python "${TANDEM_PYTHON}")
if(NOT tandem_python)
  foreach(candidate /usr/bin/python3 python3)
    execute_process(COMMAND ${candidate} -c "import google.protobuf, crcmod"
                    RESULT_VARIABLE missing OUTPUT_QUIET ERROR_QUIET)
    if(missing STREQUAL "0")
      set(tandem_python ${candidate})
      break()
    endif()
  endforeach()
  if(NOT tandem_python)
    # The TensorBoard check then reports itself skipped (status 77) with what to install.
    set(tandem_python python3)
  endif()
endif()
# tandem_python_test(NAME SCRIPT ARGS...): a check in tests/cli/SCRIPT, skipped on status 77.
function(tandem_python_test name script)
  add_test(NAME ${name} COMMAND ${tandem_python} ${PROJECT_SOURCE_DIR}/tests/cli/${script} ${ARGN}
           WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(${name} PROPERTIES TIMEOUT 300 SKIP_RETURN_CODE 77)
endfunction()
function(tandem_cli_test name status match)
  add_test(NAME cli_${name}
    COMMAND ${CMAKE_COMMAND} "-DCMD=$<TARGET_FILE:tandem_cli>;${ARGN}" -DSTATUS=${status}
            "-DMATCH=${match}" -P ${expect}
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(cli_${name} PROPERTIES TIMEOUT 180)
endfunction()

tandem_cli_test(schedule_gpipe_bubble 0 "bubble=0.2727" schedule --schedule gpipe --stages 4 --microbatches 8)
tandem_cli_test(schedule_1f1b_grid 0 "d3 \\| 3F0 3B0 3F1 3B1" schedule --schedule 1f1b --stages 4 --microbatches 8)
tandem_cli_test(help_lists_defaults 0 "--microbatches INT:INT in \\[1 - 1048576\\]=8" train --help)
tandem_cli_test(bad_option 2 "tandem: " train --no-such-option)
# A mistyped flag is named with the one it most likely meant; a budget without a unit is bytes.
tandem_cli_test(misspelled_flag 2 "tandem: --devcies: did you mean --devices\\?" train --devcies 2)
tandem_cli_test(device_memory_without_unit 3 "--device-memory 128 is 128 bytes; a unit is probably missing" train --model unet3d --data spheres --levels 2 --filters 2 --volume 16 --batch 2 --microbatches 1 --steps 1 --train-samples 2 --test-samples 0 --devices 1 --device-memory 128 --progress none)
set_tests_properties(cli_schedule_gpipe_bubble cli_schedule_1f1b_grid cli_help_lists_defaults
  cli_bad_option cli_misspelled_flag cli_device_memory_without_unit PROPERTIES LABELS quick)
# forward-only is a schedule for evaluation: training with it is refused before any step.
tandem_cli_test(forward_only_does_not_train 2 "forward-only runs forwards only: a training step needs the backward" train --model unet3d --data spheres --levels 2 --filters 2 --volume 16 --batch 2 --microbatches 1 --steps 1 --train-samples 2 --test-samples 0 --devices 2 --schedule forward-only --progress none)
# The library names option fields, the command line its flags: every field a library message names
# is a flag here, and an error shows the flag.
tandem_python_test(cli_flag_words flag_words_check.py ${PROJECT_SOURCE_DIR} $<TARGET_FILE:tandem_cli>)
tandem_python_test(cli_own_name_after_restart own_name_check.py $<TARGET_FILE:tandem_cli>)
tandem_cli_test(error_names_flags 2 "--lr must be positive, not -1" train --lr=-1 --steps 1)
tandem_cli_test(catalog_in_help 0 "unet3d +a 3D U-Net segmenting 0/1 masks \\(Dice, --bce\\): --levels" train --help)
tandem_cli_test(unknown_model 2 "unknown model 'cnn'; use conv3d-stack, mlp, unet3d or a path to an .onnx file" train --model cnn --steps 1)
tandem_cli_test(bad_schedule 2 "unknown schedule 'nope'; valid names: 1f1b, forward-only, gpipe, interleaved, sequential, v-half, v-min, zb-h1, zb-v" train --schedule nope --steps 1)
tandem_cli_test(balance_mismatch 2 "balance 3,4 covers 7 layers but the model has" train --balance 3,4 --steps 1)
tandem_cli_test(too_many_microbatches 2 "micro-batches cannot be cut from a batch of 4" train --batch 4 --microbatches 8 --devices 2 --steps 1 --progress none)
tandem_cli_test(train_two_steps 0 "result: steps=2 loss=[0-9.]+ test_accuracy=[0-9.]+ samples_per_s=" train --devices 2 --steps 2 --batch 32 --microbatches 4 --eval-batch 5000 --progress none)
tandem_cli_test(out_of_memory_exit_3 3 "out of its" train --devices 2 --steps 1 --batch 64 --width 512 --device-memory 1MiB --progress none)
tandem_cli_test(devices_cpu_name_twice 2 "device 'cpu:0' appears twice in --devices cpu:0,cpu:0" train --devices cpu:0,cpu:0 --steps 1)
# The JSON report: its fields, one memory per CPU device, the same peaks as the result line.
add_test(NAME cli_report_json
  COMMAND ${CMAKE_COMMAND}
          "-DCMD=$<TARGET_FILE:tandem_cli>;train;--devices;2;--steps;4;--batch;32;--microbatches;4;--eval-batch;5000;--progress;none;--trace-steps;2;--report;${PROJECT_BINARY_DIR}/cli_report.json"
          -DREPORT=${PROJECT_BINARY_DIR}/cli_report.json -DDEVICES=2
          -P ${CMAKE_CURRENT_LIST_DIR}/report_json.cmake
  WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(cli_report_json PROPERTIES TIMEOUT 180)
# The outputs read back without tandem's own readers: the TensorBoard event file (record
# framing, both CRCs, Event protos with the scalar tags and the run's values) and the SVG
# timeline (a box for every action, on its device's row, in time order, where the trace puts it).
tandem_python_test(cli_tensorboard_file tensorboard_check.py $<TARGET_FILE:tandem_cli>
                   ${PROJECT_BINARY_DIR}/cli_tensorboard)
tandem_python_test(cli_timeline_svg timeline_check.py $<TARGET_FILE:tandem_cli>
                   ${PROJECT_BINARY_DIR}/cli_timeline)
# The result line's weights= fingerprint: the definition's value computed by PyTorch from the
# consolidated state dict, the same from eval and from other layouts, another for other weights.
tandem_python_test(cli_weights_fingerprint weights_fingerprint_check.py $<TARGET_FILE:tandem_cli>
                   ${PROJECT_BINARY_DIR}/cli_weights_fingerprint)
# --precision bf16: refusals, and split runs against one device within bf16's rounding.
tandem_python_test(cli_precision_bf16 precision_check.py $<TARGET_FILE:tandem_cli>
                   ${PROJECT_BINARY_DIR}/cli_precision_bf16
                   ${PROJECT_BINARY_DIR}/onnx_fixtures/unet3d.onnx)
# The memory plan of a bf16 run as a user meets it (tests/onnx/plan_check.py): no device above
# its stage's "at most", the planned peak within 10% of the measured one, on one device, 2 slabs,
# 2 stages and 2 stages of 2 slabs (skipped where the kernels compute no bf16). With
# --recompute stage the plan of the first stage is above 10% in fp32 as in bf16.
add_test(NAME cli_plan_bf16
  COMMAND ${tandem_python} ${PROJECT_SOURCE_DIR}/tests/onnx/plan_check.py $<TARGET_FILE:tandem_cli>
    -- --model unet3d --levels 3 --filters 8 --data spheres --volume 32 --batch 4
    --microbatches 2 --train-samples 8 --test-samples 0 --seed 0 --dropout 0
    --cpu-kernels native --precision bf16
    -- --devices 1 -- --devices 2 --spatial 2 -- --devices 2 --stages 2
    -- --devices 4 --stages 2 --spatial 2
  WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(cli_plan_bf16 PROPERTIES TIMEOUT 300 SKIP_RETURN_CODE 77)
# The ONNX U-Net comes from the onnx_fixtures test where ONNX is built in (else not checked).
set_tests_properties(cli_precision_bf16 PROPERTIES FIXTURES_REQUIRED onnx_fixtures)
# Out of the budget while a stage's parameters move to its device: the stage and layer are named
# (only stage 1 holds more than the budget).
tandem_cli_test(out_of_memory_placing_parameters_exit_3 3 "cpu:1 is out of its 1.0 MiB budget: stage 1, layer conv3 \\(parameters\\) asked for 432.0 KiB" train --model conv3d-stack --convs 8 --filters 64 --data regression --volume 8 --devices 2 --balance 1,7 --batch 2 --microbatches 2 --steps 1 --device-memory 1MiB --progress none)
# Out of the budget in the optimizer phase (Adam's state on the first step): status 3 as well.
tandem_cli_test(out_of_memory_in_optimizer_exit_3 3 "stage 2 \\(optimizer\\) asked for .* Ways out: more devices or another --balance \\(fewer parameters on this device\\), or a larger --device-memory" train --model mlp --width 256 --blocks 4 --balance 1,1,9,1 --device-memory 6MiB --microbatches 4 --steps 2 --progress none)

# Checkpoints through the command line: save, resume to the same weights, consolidate, start
# from the consolidated file. The fixtures order the steps. The runs keep the default cosine
# learning rate over their 4 steps, so a resumed run must also pick up the schedule where it was.
# Each device multiplies with one thread of its own (--threads-per-device 1 --idle-cores keep):
# with 2 and with 4 devices alike, so that BLAS kernels whose last bits depend on their thread
# count, and the lending of idle cores (cli_idle_cores_*), stay out of the comparisons.
set(ckpt ${PROJECT_BINARY_DIR}/cli_ckpt)
set(common --batch 32 --microbatches 4 --eval-batch 5000 --progress none --seed 3 --steps 4
    --threads-per-device 1 --idle-cores keep)
add_test(NAME cli_ckpt_clean COMMAND ${CMAKE_COMMAND} -E rm -rf ${ckpt})
tandem_cli_test(ckpt_full 0 "result: steps=4 loss=[0-9.]+ test_accuracy=0[.][0-9]+ " train ${common} --devices 2 --save-dir ${ckpt}/full)
# Resumed from step 2 on 4 devices, a run ends with the weights and held-out accuracy of the
# same run uninterrupted on 2 devices, byte for byte (its step-4 checkpoint); the step-2 weights
# it resumed from differ from them, so the comparison sees a resume that trained nothing.
add_test(NAME cli_ckpt_resume
  COMMAND ${CMAKE_COMMAND} -DKEY=test_accuracy
    "-DCMD0=$<TARGET_FILE:tandem_cli>;train;${common};--devices;2;--save-dir;${ckpt}/half;--save-every;2;--keep;0"
    "-DCMD1=$<TARGET_FILE:tandem_cli>;train;${common};--devices;4;--resume;${ckpt}/half/step-2;--save-dir;${ckpt}/resumed"
    "-DCMD2=$<TARGET_FILE:tandem_cli>;consolidate;${ckpt}/half/step-4;-o;${ckpt}/uninterrupted.pt"
    "-DCMD3=$<TARGET_FILE:tandem_cli>;consolidate;${ckpt}/resumed;-o;${ckpt}/resumed.pt"
    "-DCMD4=$<TARGET_FILE:tandem_cli>;consolidate;${ckpt}/half/step-2;-o;${ckpt}/step-2.pt"
    "-DSAME=${ckpt}/uninterrupted.pt;${ckpt}/resumed.pt"
    "-DDIFFERENT=${ckpt}/uninterrupted.pt;${ckpt}/step-2.pt"
    -P ${CMAKE_CURRENT_LIST_DIR}/same_weights.cmake
  WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(cli_ckpt_resume PROPERTIES TIMEOUT 300)
tandem_cli_test(ckpt_consolidate 0 "result: tensors=" consolidate --checkpoint ${ckpt}/full -o ${ckpt}/model.pt)
tandem_cli_test(ckpt_init_from 0 "result: steps=0 loss=none test_accuracy=" train ${common} --devices 3 --init-from ${ckpt}/model.pt --eval-only)
tandem_cli_test(ckpt_resume_complete 0 "result: steps=4 loss=none test_accuracy=[0-9.]+ " train ${common} --devices 2 --resume ${ckpt}/full)
tandem_cli_test(ckpt_resume_past_steps 2 "the checkpoint .*/full is at step 4, past the 2 steps of this run: give more --steps or --epochs to continue it" train --batch 32 --microbatches 4 --eval-batch 5000 --progress none --seed 3 --steps 2 --lr-schedule constant --devices 2 --resume ${ckpt}/full)
tandem_cli_test(ckpt_wrong_model 2 "was saved from another model: 'dense0.weight' has shape \\[128, 784\\] in the checkpoint but \\[64, 784\\] in this model" train ${common} --devices 2 --width 64 --resume ${ckpt}/full)
set_tests_properties(cli_ckpt_clean PROPERTIES FIXTURES_SETUP ckpt_clean)
set_tests_properties(cli_ckpt_full PROPERTIES FIXTURES_REQUIRED ckpt_clean FIXTURES_SETUP ckpt_saved)
set_tests_properties(cli_ckpt_resume PROPERTIES FIXTURES_REQUIRED ckpt_clean)
set_tests_properties(cli_ckpt_consolidate cli_ckpt_wrong_model cli_ckpt_resume_complete cli_ckpt_resume_past_steps PROPERTIES FIXTURES_REQUIRED ckpt_saved)
set_tests_properties(cli_ckpt_consolidate PROPERTIES FIXTURES_SETUP ckpt_consolidated)
set_tests_properties(cli_ckpt_init_from PROPERTIES FIXTURES_REQUIRED "ckpt_saved;ckpt_consolidated")

# tandem eval: a checkpoint's held-out metric is the one its training run printed, on other
# devices, partitions and schedules, and from its consolidated file. Each layer sees the same
# micro-batches as in training (same --batch, --microbatches, --eval-batch), so the logits are
# bitwise those of the training run's evaluation and the printed accuracy must be equal: over
# the 10,000 held-out images, 4 decimals print the count of right answers itself. The
# last command's steps of 4990 leave 20 samples, too few for its 32 micro-batches: they join
# the last step, and the accuracy is still over all 10000.
set(eval_common --batch 32 --microbatches 4 --eval-batch 5000 --seed 3)
add_test(NAME cli_eval_matches_training
  COMMAND ${CMAKE_COMMAND} -DKEY=test_accuracy
    "-DCMD0=$<TARGET_FILE:tandem_cli>;train;${common};--devices;2;--save-dir;${ckpt}/eval"
    "-DCMD1=$<TARGET_FILE:tandem_cli>;eval;--checkpoint;${ckpt}/eval;${eval_common};--devices;1"
    "-DCMD2=$<TARGET_FILE:tandem_cli>;eval;--checkpoint;${ckpt}/eval/step-4;${eval_common};--devices;3;--balance;2,3,3;--schedule;gpipe"
    "-DCMD3=$<TARGET_FILE:tandem_cli>;consolidate;${ckpt}/eval;-o;${ckpt}/eval.pt"
    "-DCMD4=$<TARGET_FILE:tandem_cli>;eval;--checkpoint;${ckpt}/eval.pt;${eval_common};--devices;4;--schedule;zb-h1"
    "-DCMD5=$<TARGET_FILE:tandem_cli>;eval;--checkpoint;${ckpt}/eval.pt;--batch;32;--microbatches;32;--eval-batch;4990;--seed;3;--devices;2"
    -P ${CMAKE_CURRENT_LIST_DIR}/same_metric.cmake
  WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(cli_eval_matches_training PROPERTIES TIMEOUT 600 FIXTURES_REQUIRED ckpt_clean)
tandem_cli_test(held_out_set_smaller_than_microbatches 2 "the held-out set has 3 samples, too few for 4 micro-batches: use --microbatches 3 or fewer" train --model conv3d-stack --data regression --volume 8 --test-samples 3 --batch 4 --microbatches 4 --steps 1)
tandem_cli_test(unet3d_on_regression_data 2 "--data regression gives real-valued targets, but model unet3d needs 0/1 masks: use --data mri or spheres, or --model conv3d-stack" train --model unet3d --data regression --steps 1)
tandem_cli_test(no_held_out_set 0 "result: steps=1 loss=[0-9.]+ test_mse=none " train --model conv3d-stack --data regression --volume 8 --convs 2 --filters 4 --devices 2 --test-samples 0 --batch 4 --microbatches 4 --steps 1 --progress none)
tandem_cli_test(eval_help_lists_options 0 "--checkpoint TEXT .*--balance" eval --help)
# A failed `make build` removes the program an earlier build left (tandem --version below names
# the commit a program was built from).
add_test(NAME cli_failed_build_removes_program
  COMMAND ${CMAKE_COMMAND} -DSOURCE=${PROJECT_SOURCE_DIR} -DDIR=${PROJECT_BINARY_DIR}/failed_build
    -P ${CMAKE_CURRENT_LIST_DIR}/failed_build.cmake)
set_tests_properties(cli_failed_build_removes_program PROPERTIES TIMEOUT 300)
# --version names the commit of the sources the program was built from (or says it is unknown).
tandem_cli_test(version 0 "^tandem [0-9]+[.][0-9]+[.][0-9]+, commit ([0-9a-f]+|unknown).* [(]LibTorch [0-9.]+" --version)
tandem_cli_test(eval_needs_checkpoint 2 "eval needs --checkpoint" eval --devices 2)
tandem_cli_test(eval_bad_path 2 "--checkpoint no/such/folder: no such file or folder" eval --checkpoint no/such/folder)
tandem_cli_test(eval_folder_without_checkpoint 2 "holds no complete checkpoint" eval --checkpoint tests/cli ${eval_common} --devices 2)
tandem_cli_test(eval_not_a_state_dict 2 "cannot be read as a state dict" eval --checkpoint README.md ${eval_common} --devices 2)
tandem_cli_test(eval_wrong_model 2 "does not match model 'mlp': other shape: dense0.weight" eval --checkpoint ${ckpt}/full ${eval_common} --devices 2 --width 64)
set_tests_properties(cli_eval_wrong_model PROPERTIES FIXTURES_REQUIRED ckpt_saved)

# The same command gives the same weights, byte for byte in the consolidated state dict:
# - same_weights: run twice more with two busy processes beside it (other timings), once with
#   --idle-cores keep spelled out (the default). 4 devices of 3 threads each and 2 micro-batches,
#   so that stages often compute alone (where lending cores changed the BLAS thread count with
#   the timing) and each product is split among threads.
# - any_machine: on a machine of 1 core (taskset) and of all this machine's cores, one device
#   gets the same thread count, so the same bits (the count once came from the cores); with the
#   default count spelled out under load.
# Each under each OpenBLAS kernel family (tests/CMakeLists.txt, --cpu-kernels native so that the
# family is the one run): a product's last bits depend on its thread count on all of them.
set(same_common $<TARGET_FILE:tandem_cli> train --model mlp --width 512 --blocks 2 --microbatches 2 --batch 128 --steps 3 --eval-batch 5000 --progress none --seed 5)
set(threaded ${same_common} --devices 4 --threads-per-device 3)
set(one_device ${same_common} --devices 1)
foreach(kernel ${TANDEM_BLAS_KERNELS})
  set(name cli_same_command_same_weights_${kernel})
  add_test(NAME ${name}
    COMMAND ${CMAKE_COMMAND} -DTANDEM=$<TARGET_FILE:tandem_cli> -DDIR=${PROJECT_BINARY_DIR}/${name}
      -DLOAD=ON "-DCMD0=${threaded}" "-DCMD1=${threaded}" "-DCMD2=${threaded};--idle-cores;keep"
      -P ${CMAKE_CURRENT_LIST_DIR}/same_state.cmake
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set(name cli_same_command_any_machine_${kernel})
  add_test(NAME ${name}
    COMMAND ${CMAKE_COMMAND} -DTANDEM=$<TARGET_FILE:tandem_cli> -DDIR=${PROJECT_BINARY_DIR}/${name}
      -DLOAD=ON "-DCMD0=taskset;-c;0;${one_device}" "-DCMD1=${one_device}"
      "-DCMD2=${one_device};--threads-per-device;1"
      -P ${CMAKE_CURRENT_LIST_DIR}/same_state.cmake
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(cli_same_command_same_weights_${kernel} ${name} PROPERTIES TIMEOUT 300
                       LABELS blas
                       ENVIRONMENT "OPENBLAS_CORETYPE=${kernel};TANDEM_CPU_KERNELS=native")
endforeach()
# any_cpu: by default (--cpu-kernels portable) every x86-64 machine with AVX2 computes with the
# AVX2 kernel families: the kernels an AVX-512 machine's libraries would choose (SkylakeX or
# Cooperlake, ATen's AVX-512) are replaced, so the same bits as on this machine. So is another
# BLAS than OpenBLAS where Debian's alternatives made it libblas.so.3 (BLIS, the reference BLAS:
# each trains other bits than OpenBLAS), here chosen through LD_LIBRARY_PATH.
set(blas_dir /usr/lib/${CMAKE_LIBRARY_ARCHITECTURE})
add_test(NAME cli_same_command_any_cpu
  COMMAND ${CMAKE_COMMAND} -DTANDEM=$<TARGET_FILE:tandem_cli>
    -DDIR=${PROJECT_BINARY_DIR}/cli_same_command_any_cpu
    "-DCMD0=${one_device}"
    "-DCMD1=env;OPENBLAS_CORETYPE=SkylakeX;ATEN_CPU_CAPABILITY=avx512;${one_device}"
    "-DCMD2=env;OPENBLAS_CORETYPE=Cooperlake;${one_device}"
    "-DCMD3=env;OPENBLAS_CORETYPE=Zen;ATEN_CPU_CAPABILITY=default;${one_device};--cpu-kernels;portable"
    "-DCMD4=env;LD_LIBRARY_PATH=${blas_dir}/blis-pthread;${one_device}"
    "-DCMD5=env;LD_LIBRARY_PATH=${blas_dir}/blas;${one_device}"
    -P ${CMAKE_CURRENT_LIST_DIR}/same_state.cmake
  WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(cli_same_command_any_cpu PROPERTIES TIMEOUT 300 LABELS blas)
# `tandem numerics`: the same probe checksums and kernel families under every environment that
# cli_same_command_any_cpu trains under; and other checksums where the arithmetic is another
# (2 threads split the product and the sum; ATen's kernels without AVX round exp and log
# otherwise), so that its lines tell machines apart when they compute otherwise.
add_test(NAME cli_numerics_any_cpu
  COMMAND ${CMAKE_COMMAND} -DEXPECT=same
    "-DCMD0=$<TARGET_FILE:tandem_cli>;numerics"
    "-DCMD1=env;OPENBLAS_CORETYPE=SkylakeX;ATEN_CPU_CAPABILITY=avx512;$<TARGET_FILE:tandem_cli>;numerics"
    "-DCMD2=env;OPENBLAS_CORETYPE=Cooperlake;$<TARGET_FILE:tandem_cli>;numerics"
    "-DCMD3=env;OPENBLAS_CORETYPE=Zen;ATEN_CPU_CAPABILITY=default;$<TARGET_FILE:tandem_cli>;numerics"
    "-DCMD4=env;LD_LIBRARY_PATH=${blas_dir}/blis-pthread;$<TARGET_FILE:tandem_cli>;numerics"
    "-DCMD5=env;LD_LIBRARY_PATH=${blas_dir}/blas;$<TARGET_FILE:tandem_cli>;numerics"
    -P ${CMAKE_CURRENT_LIST_DIR}/same_numerics.cmake)
add_test(NAME cli_numerics_sees_other_arithmetic
  COMMAND ${CMAKE_COMMAND} -DEXPECT=differ
    "-DCMD0=$<TARGET_FILE:tandem_cli>;numerics"
    "-DCMD1=$<TARGET_FILE:tandem_cli>;numerics;--threads;2" "-DDIFFER1=sgemm|reduction"
    "-DCMD2=env;ATEN_CPU_CAPABILITY=default;$<TARGET_FILE:tandem_cli>;numerics;--cpu-kernels;native"
    "-DDIFFER2=exp and log"
    -P ${CMAKE_CURRENT_LIST_DIR}/same_numerics.cmake)
set_tests_properties(cli_numerics_any_cpu cli_numerics_sees_other_arithmetic PROPERTIES
                     TIMEOUT 120 LABELS blas)
# The same for a convolutional model: oneDNN, which LibTorch's convolutions call, picks its
# kernels from the processor (ONEDNN_MAX_CPU_ISA caps them here as an older machine's would be);
# its AVX-512, AVX2 and SSE4.1 kernels trained a U-Net to three sets of bits.
set(conv_common $<TARGET_FILE:tandem_cli> train --model unet3d --data spheres --volume 8 --levels 2 --filters 4 --batch 4 --microbatches 2 --devices 2 --steps 2 --test-samples 4 --progress none --seed 5)
add_test(NAME cli_same_command_any_cpu_conv
  COMMAND ${CMAKE_COMMAND} -DTANDEM=$<TARGET_FILE:tandem_cli>
    -DDIR=${PROJECT_BINARY_DIR}/cli_same_command_any_cpu_conv
    "-DCMD0=${conv_common}"
    "-DCMD1=env;ONEDNN_MAX_CPU_ISA=AVX2;DNNL_MAX_CPU_ISA=AVX2;${conv_common}"
    "-DCMD2=env;ONEDNN_MAX_CPU_ISA=SSE41;DNNL_MAX_CPU_ISA=SSE41;${conv_common}"
    -P ${CMAKE_CURRENT_LIST_DIR}/same_state.cmake
  WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(cli_same_command_any_cpu_conv PROPERTIES TIMEOUT 300 LABELS blas)
# With --partition memory and a budget, the plan says whether its planned peaks fit: they do
# not under 1 MiB (and the first step then stops out of memory), they do under 4 MiB.
tandem_cli_test(memory_plan_over_budget 3 "warning: stage 1 on cpu:1 plans [0-9.]+ MiB, above --device-memory 1.0 MiB: expect the first step to stop out of memory.*cpu:1 is out of its 1.0 MiB budget" train --partition memory --device-memory 1MiB --steps 1 --progress none)
tandem_cli_test(memory_plan_within_budget 0 "planned peaks fit --device-memory 4.0 MiB \\(largest: [0-9.]+ MiB on cpu:1\\)" train --partition memory --device-memory 4MiB --steps 1 --progress none)
# A plan that fits holds for the held-out pass too: under a budget, images evaluate in
# training-size batches (in chunks of --eval-batch 1000, cpu:0 stopped out of its budget there).
tandem_cli_test(memory_plan_holds_for_evaluation 0 "planned peaks fit --device-memory 2.6 MiB.*result: steps=3 .*test_accuracy=" train --devices 4 --partition memory --device-memory 2.6MiB --steps 3 --progress none)

# --partition fit needs a budget; under 4 MiB, where the parameter split runs out of memory, it
# trains on a split whose plan fits.
tandem_cli_test(partition_fit_needs_a_budget 2 "--partition fit chooses the most even compute among the splits whose plan fits --device-memory: give --device-memory" train --partition fit --steps 1)
tandem_cli_test(partition_fit_trains_within_the_budget 0 "planned peaks fit --device-memory 4.0 MiB.*result: steps=1 " train --model conv3d-stack --convs 8 --filters 16 --data regression --volume 16 --batch 8 --microbatches 8 --devices 4 --partition fit --device-memory 4MiB --steps 1 --test-samples 8 --progress none)
tandem_cli_test(partition_parameters_over_the_same_budget 3 "cpu:[0-9] is out of its 4.0 MiB budget" train --model conv3d-stack --convs 8 --filters 16 --data regression --volume 16 --batch 8 --microbatches 8 --devices 4 --partition parameters --device-memory 4MiB --steps 1 --test-samples 8 --progress none)

# --plan-only prints the placement and the plan of the split that would run, without training:
# status 0 when it fits the budget, 3 when it does not; a --balance split is planned as well.
tandem_cli_test(plan_only_fits 0 "memory plan .*from the FLOPs alone \\(B = 2F, messages free\\): a step takes [0-9.]+x the time of its work spread evenly over the 4 devices \\(bubble 0[.][0-9]+\\)\nplanned peaks fit --device-memory 4.0 MiB" train --plan-only --partition memory --device-memory 4MiB --progress none)
tandem_cli_test(plan_only_over_budget 3 "warning: stage 1 on cpu:1 plans [0-9.]+ MiB, above --device-memory 1.0 MiB" train --plan-only --partition memory --device-memory 1MiB --progress none)
tandem_cli_test(plan_only_when_the_parameters_alone_are_over 3 "warning: stage [01] on cpu:[01] plans [0-9.]+ MiB, above --device-memory 1.0 MiB" train --plan-only --model conv3d-stack --convs 8 --filters 64 --data regression --volume 8 --devices 2 --device-memory 1MiB --progress none)
# A plan over the budget names the smallest --spatial under which the same stages would fit, and
# that --spatial does fit.
set(slab_plan train --plan-only --model conv3d-stack --convs 4 --filters 16 --data regression --volume 24 --batch 4 --microbatches 1 --partition memory --device-memory 16MiB --progress none)
tandem_cli_test(plan_over_budget_names_a_spatial_that_fits 3 "above --device-memory 16.0 MiB.*\n--spatial 2 would plan at most [0-9.]+ MiB per device \\(4 devices: 2 groups of 2\\), within the budget" ${slab_plan} --devices 2)
tandem_cli_test(plan_with_the_spatial_named_fits 0 "planned peaks fit --device-memory 16.0 MiB" ${slab_plan} --devices 4 --spatial 2)
tandem_cli_test(plan_only_of_a_balance 0 "memory plan [^\n]*\n[^\n]*\n0 +flatten..dense0 " train --plan-only --balance 2,2,2,2 --progress none)

# What a run writes at its end is checked at its start: a missing folder ends it at once.
tandem_cli_test(trace_folder_missing 2 "--trace no/such/folder/run.json: the folder no/such/folder does not exist; create it first" train --trace no/such/folder/run.json --steps 1)
tandem_cli_test(report_is_a_folder 2 "--report tests: that is a folder; give a file name" train --report tests --steps 1)
tandem_cli_test(save_dir_under_a_file 2 "--save-dir README.md/ckpt: .*README.md is not a folder" train --save-dir README.md/ckpt --steps 1)
tandem_cli_test(sgd_momentum_out_of_range 2 "--momentum must be in \\[0, 1\\), not -1" train --optimizer sgd --momentum -1 --steps 1)
tandem_cli_test(idle_cores_bad_value 2 "--idle-cores: share not in" train --idle-cores share --steps 1)
tandem_cli_test(mpi_cuda_without_mpi 2 "--mpi-cuda staged chooses how CUDA tensors go between MPI ranks, but this run has no ranks" train --mpi-cuda staged --steps 1)
tandem_cli_test(mpi_cuda_bad_value 2 "--mpi-cuda: gpu not in \\{auto,staged,direct\\}" train --mpi-cuda gpu --steps 1)

# --spatial N: refused for a model without a volume and for more slabs than the depth allows;
# trains with its placement table showing each device's planes; its checkpoints resume under
# another split, under stages and on one device (spatial_resume.cmake).
set(spatial_common --model unet3d --data spheres --levels 2 --filters 4 --volume 16 --batch 2
                   --microbatches 2 --steps 1 --test-samples 4 --progress none)
tandem_cli_test(spatial_needs_a_volume 2 "--spatial 2 cuts every sample's volume into slabs, but model mlp has no volume: use --model conv3d-stack or unet3d" train --model mlp --spatial 2 --devices 2 --steps 1)
tandem_cli_test(spatial_too_many_slabs 2 "--volume 16 with model unet3d and --spatial 8: 8 slabs of at least 4 planes need a depth of at least 32" train --model unet3d --data spheres --levels 3 --volume 16 --spatial 8 --devices 8 --steps 1)
tandem_cli_test(spatial_trains 0 "planes 0:8 of 16.*planes 8:16 of 16.*result: steps=1 loss=[0-9.]+ test_dice=[0-9.]+" train ${spatial_common} --devices 4 --stages 2 --spatial 2)
# tandem plan: every layout measured and planned, the fastest that fits chosen; options given
# stay fixed; nothing that fits ends with status 3 and a budget that does, which train --auto
# then keeps to (plan_auto.cmake).
set(plan_mlp --model mlp --width 64 --devices 2 --batch 8 --repeats 1)
tandem_cli_test(plan_chooses 0 "rank +samples/s +step ms +peak/device +flags.*chosen: tandem train --width 64 --devices 2 --balance [0-9,]+" plan ${plan_mlp})
tandem_cli_test(plan_holds_options_given 0 "; 1 configuration planned.*--spatial 2 --schedule gpipe --microbatches 2 --recompute stage" plan ${spatial_common} --repeats 1 --devices 2 --spatial 2 --schedule gpipe --recompute stage)
tandem_cli_test(plan_nothing_fits 3 "no configuration fits --device-memory 100.0 KiB on these devices: the leanest .* plans [0-9.]+ [KM]iB per device; give --device-memory [0-9.]+MiB or more" plan ${plan_mlp} --device-memory 100KiB)
tandem_cli_test(plan_slabs_under_a_budget 0 "chosen: tandem train .*--spatial 2" plan --model unet3d --data spheres --levels 2 --filters 4 --volume 32 --batch 2 --devices 2 --repeats 1 --device-memory 5MiB)
add_test(NAME cli_plan_auto_keeps_the_budget
  COMMAND ${CMAKE_COMMAND} -DTANDEM=$<TARGET_FILE:tandem_cli>
          -DDIR=${CMAKE_CURRENT_BINARY_DIR}/plan_auto
          -P ${CMAKE_CURRENT_LIST_DIR}/plan_auto.cmake
  WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(cli_plan_auto_keeps_the_budget PROPERTIES TIMEOUT 300)
add_test(NAME cli_plan_largest_volume_trains
  COMMAND ${CMAKE_COMMAND} -DTANDEM=$<TARGET_FILE:tandem_cli>
          -P ${CMAKE_CURRENT_LIST_DIR}/plan_volume.cmake
  WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(cli_plan_largest_volume_trains PROPERTIES TIMEOUT 300)
add_test(NAME cli_plan_nothing_fits_names_a_volume_that_does
  COMMAND ${CMAKE_COMMAND} -DTANDEM=$<TARGET_FILE:tandem_cli>
          -P ${CMAKE_CURRENT_LIST_DIR}/plan_nothing_fits.cmake
  WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(cli_plan_nothing_fits_names_a_volume_that_does PROPERTIES TIMEOUT 300)
find_program(TANDEM_PYTHON3 python3 PATHS /usr/bin NO_DEFAULT_PATH)
add_test(NAME cli_spatial_resume
  COMMAND ${CMAKE_COMMAND} -DTANDEM=$<TARGET_FILE:tandem_cli> -DPYTHON=${TANDEM_PYTHON3}
          -DDIR=${CMAKE_CURRENT_BINARY_DIR}/spatial_resume
          -P ${CMAKE_CURRENT_LIST_DIR}/spatial_resume.cmake
  WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(cli_spatial_resume PROPERTIES TIMEOUT 300)

# Data of one's own: NIfTI and npy folders written by tests/data/make_fixtures.py (numpy and
# nibabel), trained on for two steps, and bad files refused at start with status 2, by name.
set(fx ${PROJECT_BINARY_DIR}/cli_data)
add_test(NAME cli_data_fixtures
  COMMAND ${TANDEM_FIXTURE_PYTHON} ${PROJECT_SOURCE_DIR}/tests/data/make_fixtures.py folders ${fx})
set_tests_properties(cli_data_fixtures PROPERTIES FIXTURES_SETUP data_folders TIMEOUT 180)
set(two_steps --steps 2 --devices 2 --progress none)
set(unet_small --model unet3d --levels 2 --filters 4 --dropout 0 --batch 2 --microbatches 2)
tandem_cli_test(nifti_mri_one_pair 0 "data: 16\\^3 crops of .*cli_data/ch2 \\(1 files, 1 channels; 0 held out.*result: steps=2 loss=[0-9.]+ test_dice=none" train ${unet_small} --data nifti:${fx}/ch2 --test-files 0 --volume 16 ${two_steps})
tandem_cli_test(nifti_4d_int16_slope_held_out 0 "data: 16\\^3 crops of .*cli_data/multi \\(3 files, 2 channels; 1 held out.*result: steps=2 loss=[0-9.]+ test_dice=[0-9.]+ " train ${unet_small} --data nifti:${fx}/multi --test-files 1 --test-samples 2 --volume 16 ${two_steps})
# No file held out (--test-files 0): no held-out metric, "none" as for the MRI pair above.
tandem_cli_test(nifti_conv3d_real_labels 0 "result: steps=2 loss=[0-9.]+ test_mse=none " train --model conv3d-stack --convs 2 --filters 4 --batch 2 --microbatches 2 --data nifti:${fx}/multiclass --test-files 0 --volume 8 ${two_steps})
tandem_cli_test(nifti_multiclass_label_refused 2 "the label '.*cli_data/multiclass/labels/a.nii' holds values other than 0 and 1 \\(2, 4\\)" train ${unet_small} --data nifti:${fx}/multiclass --test-files 0 --volume 8 ${two_steps})
tandem_cli_test(nifti_truncated_image_refused 2 "'.*cli_data/truncated/images/a.nii' is truncated" train ${unet_small} --data nifti:${fx}/truncated --test-files 0 --volume 8 ${two_steps})
tandem_cli_test(nifti_unpaired_image_refused 2 "the image '.*cli_data/unpaired/images/b.nii' has no label" train ${unet_small} --data nifti:${fx}/unpaired --volume 8 ${two_steps})
tandem_cli_test(nifti_with_mlp_refused 2 "--data nifti:.* gives volumes with voxel-wise labels; use --model unet3d" train --model mlp --data nifti:${fx}/multi ${two_steps})
tandem_cli_test(npy_mlp_classes 0 "data: npy arrays in .*cli_data/npy_mlp \\(48 training, 12 test samples of shape \\(6, 6\\)\\).*result: steps=2 loss=[0-9.]+ test_accuracy=[0-9.]+ " train --model mlp --width 16 --blocks 1 --classes 3 --data npy:${fx}/npy_mlp --batch 8 --microbatches 2 --eval-batch 12 ${two_steps})
tandem_cli_test(npy_unet_masks 0 "result: steps=2 loss=[0-9.]+ test_dice=[0-9.]+ " train ${unet_small} --data npy:${fx}/npy_unet ${two_steps})
tandem_cli_test(npy_conv3d_two_channels 0 "shape \\(2, 6, 7, 5\\).*result: steps=2 loss=[0-9.]+ test_mse=[0-9.]+ " train --model conv3d-stack --convs 2 --filters 4 --batch 2 --microbatches 2 --data npy:${fx}/npy_conv ${two_steps})
tandem_cli_test(npy_labels_shape_refused 2 "'.*cli_data/npy_bad_shape/train_y.npy' has shape \\(10, 1\\) and dtype '<i8'; cross-entropy needs one class label per sample: shape \\(10,\\)" train --model mlp --data npy:${fx}/npy_bad_shape ${two_steps})
tandem_cli_test(npy_label_out_of_range_refused 2 "'.*cli_data/npy_bad_label/train_y.npy' holds the label 7 at sample 3; the model has 3 classes" train --model mlp --classes 3 --data npy:${fx}/npy_bad_label --batch 4 --microbatches 2 ${two_steps})
tandem_cli_test(npy_bad_header_refused 2 "'.*cli_data/npy_bad_header/train_y.npy' has an npy header with the unknown key 'dexcr'" train --model mlp --data npy:${fx}/npy_bad_header ${two_steps})
tandem_cli_test(npy_unet_volume_not_divisible 2 "npy_conv/train_x.npy' has shape \\(8, 2, 6, 7, 5\\): the U-Net halves the volume 1 times, so D, H and W must be multiples of 2" train ${unet_small} --data npy:${fx}/npy_conv ${two_steps})
set_tests_properties(cli_nifti_mri_one_pair cli_nifti_4d_int16_slope_held_out
  cli_nifti_conv3d_real_labels cli_nifti_multiclass_label_refused cli_nifti_truncated_image_refused
  cli_nifti_unpaired_image_refused cli_nifti_with_mlp_refused cli_npy_mlp_classes cli_npy_unet_masks
  cli_npy_conv3d_two_channels cli_npy_labels_shape_refused cli_npy_label_out_of_range_refused
  cli_npy_bad_header_refused cli_npy_unet_volume_not_divisible
  PROPERTIES FIXTURES_REQUIRED data_folders)

# One exit-status rule (commands.h, README): 2 when the command line or an input file is wrong,
# found before any work; 1 for a failure while working; 3 out of memory. A checkpoint that does
# not fit the run (above: another model, past --steps, not a checkpoint) is an input file that
# is wrong: 2, for train and eval alike.
tandem_cli_test(resume_missing_folder 2 "--resume no/such/folder: no such folder; give the save folder of an earlier run" train --resume no/such/folder --steps 1)
tandem_cli_test(resume_a_file 2 "--resume README.md: that is not a folder; --resume takes a save folder or one step-N checkpoint in it .*give it to --init-from" train --resume README.md --steps 1)
tandem_cli_test(ckpt_resume_other_data 2 "the checkpoint was saved from a run on --data mnist, not fashion-mnist; resume with --data mnist" train ${common} --devices 2 --data fashion-mnist --resume ${ckpt}/full)
set_tests_properties(cli_ckpt_resume_other_data PROPERTIES FIXTURES_REQUIRED ckpt_saved)
tandem_cli_test(devices_beyond_an_int 2 "^tandem: --devices 99999999999 must be a count between 1 and 1024 \\(or a list: cpu:0,cpu:1\\)\n$" train --devices 99999999999 --steps 1)
tandem_cli_test(seed_negative 2 "--seed: -1 is not a whole number from 0 to 18446744073709551615" train --seed -1 --steps 1)
tandem_cli_test(seed_beyond_64_bits 2 "--seed: 99999999999999999999 is not a whole number from 0 to 18446744073709551615" train --seed 99999999999999999999 --steps 1)
tandem_cli_test(seed_largest 0 "result: steps=1 " train --seed 18446744073709551615 --devices 2 --steps 1 --batch 32 --microbatches 4 --eval-batch 5000 --progress none)
tandem_cli_test(device_memory_zero 2 "--device-memory: 0 gives no memory at all; give a budget such as 2GiB, or leave the option out for no budget" train --device-memory 0 --steps 1)
# A volume whose samples cannot fit the machine is refused from its size, before it is
# allocated (LibTorch's allocator would fail with a raw message, or the system kill the run).
tandem_cli_test(plan_only_volume_beyond_memory 3 "^tandem: --volume 4096 does not fit: one micro-batch of 8 samples takes 4.0 TiB \\(inputs and targets, before any layer runs\\), more than the [0-9.]+ [MGT]iB of memory of this machine; use a smaller --volume or --batch\n$" train --model conv3d-stack --volume 4096 --data regression --plan-only --progress none)
tandem_cli_test(volume_beyond_memory 3 "--volume 4096 does not fit: one batch of 2 samples takes 1.0 TiB" train --model conv3d-stack --volume 4096 --data regression --batch 2 --microbatches 2 --steps 1 --progress none)

# Outputs are regular files: a path that exists and is something else is refused before any
# work and stays what it was (consolidate used to rename its file over it); folders where no
# file can be created (/proc, /sys) are refused before the first step.
set(special ${CMAKE_CURRENT_LIST_DIR}/special_path.cmake)
function(tandem_cli_path_test name guard status match)
  add_test(NAME cli_${name}
    COMMAND ${CMAKE_COMMAND} "-DCMD=$<TARGET_FILE:tandem_cli>;${ARGN}" -DSTATUS=${status}
            "-DMATCH=${match}" -D${guard} -P ${special}
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(cli_${name} PROPERTIES TIMEOUT 180 SKIP_REGULAR_EXPRESSION "SKIP: ")
endfunction()
tandem_cli_path_test(consolidate_onto_a_pipe FIFO=${ckpt}/pipe 2 "-o .*/pipe: that is a pipe, not a regular file" consolidate ${ckpt}/full -o ${ckpt}/pipe)
tandem_cli_path_test(consolidate_onto_dev_full CHAR_DEVICE=/dev/full 2 "^tandem: -o /dev/full: that is a character device, not a regular file; tandem writes its outputs as files of their own \\(a temporary file renamed over the old one\\): give a file name\n$" consolidate ${ckpt}/full -o /dev/full)
set_tests_properties(cli_consolidate_onto_a_pipe cli_consolidate_onto_dev_full PROPERTIES FIXTURES_REQUIRED ckpt_saved)
tandem_cli_path_test(report_onto_dev_full CHAR_DEVICE=/dev/full 2 "--report /dev/full: that is a character device, not a regular file" train --report /dev/full --steps 1 --progress none)
tandem_cli_path_test(trace_onto_dev_null CHAR_DEVICE=/dev/null 2 "--trace /dev/null: that is a character device, not a regular file" train --trace /dev/null --steps 1 --progress none)
tandem_cli_path_test(schedule_timeline_onto_dev_null CHAR_DEVICE=/dev/null 2 "--timeline /dev/null: that is a character device" schedule --timeline /dev/null)
tandem_cli_path_test(save_dir_in_proc NO_FILES_IN=/proc 2 "--save-dir /proc/x: cannot create files in /proc: " train --save-dir /proc/x --steps 1 --progress none)
tandem_cli_path_test(report_in_proc NO_FILES_IN=/proc 2 "--report /proc/r.json: cannot create files in the folder /proc: " train --report /proc/r.json --steps 1 --progress none)
tandem_cli_path_test(trace_in_proc NO_FILES_IN=/proc 2 "--trace /proc/t.json: cannot create files in the folder /proc: " train --trace /proc/t.json --steps 1 --progress none)
tandem_cli_path_test(tensorboard_in_proc NO_FILES_IN=/proc 2 "--tensorboard /proc/tb: cannot create files in /proc: " train --tensorboard /proc/tb --steps 1 --progress none)
tandem_cli_path_test(timeline_in_sys NO_FILES_IN=/sys 2 "--timeline /sys/t.svg: cannot create files in the folder /sys: " train --timeline /sys/t.svg --steps 1 --progress none)
tandem_cli_path_test(init_from_dev_zero CHAR_DEVICE=/dev/zero 2 "^tandem: '/dev/zero' is a character device, not a state dict file or a checkpoint folder: give one of those\n$" train --init-from /dev/zero --steps 1 --progress none)
tandem_cli_path_test(eval_dev_zero CHAR_DEVICE=/dev/zero 2 "'/dev/zero' is a character device, not a state dict file or a checkpoint folder" eval --checkpoint /dev/zero)

# A write that fails (a full disk; here a file-size limit) is reported with the path and the
# reason, exit status 1, and leaves no file behind: not a report line and an empty file.
add_test(NAME cli_report_write_fails
  COMMAND ${CMAKE_COMMAND}
          "-DCMD=$<TARGET_FILE:tandem_cli>;train;--devices;2;--steps;2;--batch;32;--microbatches;4;--eval-batch;5000;--progress;none;--report;${PROJECT_BINARY_DIR}/cli_report_limited.json"
          -DFILE=${PROJECT_BINARY_DIR}/cli_report_limited.json
          "-DMATCH=tandem: could not write ${PROJECT_BINARY_DIR}/cli_report_limited.json: File too large"
          -P ${CMAKE_CURRENT_LIST_DIR}/write_fails.cmake
  WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(cli_report_write_fails PROPERTIES TIMEOUT 180)

# A save folder holding another run's checkpoints: refused without --resume or --overwrite.
add_test(NAME cli_save_dir_of_another_run
  COMMAND ${CMAKE_COMMAND} -DTANDEM=$<TARGET_FILE:tandem_cli> -DDIR=${PROJECT_BINARY_DIR}/cli_other_run
          "-DCOMMON=--devices;2;--batch;32;--microbatches;4;--eval-batch;5000;--progress;none;--seed;3;--lr-schedule;constant"
          -P ${CMAKE_CURRENT_LIST_DIR}/save_dir_of_another_run.cmake
  WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(cli_save_dir_of_another_run PROPERTIES TIMEOUT 600)
tandem_cli_test(overwrite_needs_a_save_dir 2 "--overwrite replaces the checkpoints of --save-dir, but no --save-dir is given" train --overwrite --steps 1)
tandem_cli_test(regression_volume_below_its_box 2 "^tandem: --data regression needs --volume 3 or more \\(its targets are means over 3\\^3 boxes of the input\\), not 1\n$" train --model conv3d-stack --data regression --volume 1 --steps 1 --progress none)
tandem_cli_test(balance_beyond_an_int 2 "^tandem: --balance: '99999999999' is more layers than any model has; give a list like 3,4,3 \\(see --help\\)\n$" train --balance 3,99999999999 --steps 1)
include(${CMAKE_CURRENT_LIST_DIR}/verify.cmake)
