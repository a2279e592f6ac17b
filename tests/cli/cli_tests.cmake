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
tandem_cli_test(bad_schedule 2 "unknown schedule|schedule" train --schedule nope --steps 1)
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
tandem_cli_test(ckpt_consolidate 0 "result: tensors=" consolidate ${ckpt}/full -o ${ckpt}/model.pt)
tandem_cli_test(ckpt_init_from 0 "result: steps=0 loss=none test_accuracy=" train ${common} --devices 3 --init-from ${ckpt}/model.pt --eval-only)
tandem_cli_test(ckpt_resume_complete 0 "result: steps=4 loss=none test_accuracy=[0-9.]+ " train ${common} --devices 2 --resume ${ckpt}/full)
tandem_cli_test(ckpt_resume_past_steps 1 "the checkpoint .*/full is at step 4, past the 2 steps of this run: give more --steps or --epochs to continue it" train --batch 32 --microbatches 4 --eval-batch 5000 --progress none --seed 3 --steps 2 --lr-schedule constant --devices 2 --resume ${ckpt}/full)
tandem_cli_test(ckpt_wrong_model 1 "differ|shape|layer" train ${common} --devices 2 --width 64 --resume ${ckpt}/full)
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
tandem_cli_test(unet3d_on_regression_data 2 "--data regression gives real-valued targets for conv3d-stack; unet3d segments masks: use --data spheres or mri" train --model unet3d --data regression --steps 1)
tandem_cli_test(no_held_out_set 0 "result: steps=1 loss=[0-9.]+ test_mse=none " train --model conv3d-stack --data regression --volume 8 --convs 2 --filters 4 --devices 2 --test-samples 0 --batch 4 --microbatches 4 --steps 1 --progress none)
tandem_cli_test(eval_help_lists_options 0 "--checkpoint TEXT REQUIRED.*--balance" eval --help)
tandem_cli_test(eval_needs_checkpoint 2 "--checkpoint is required" eval --devices 2)
tandem_cli_test(eval_bad_path 2 "--checkpoint no/such/folder: no such file or folder" eval --checkpoint no/such/folder)
tandem_cli_test(eval_folder_without_checkpoint 1 "holds no complete checkpoint" eval --checkpoint tests/cli ${eval_common} --devices 2)
tandem_cli_test(eval_not_a_state_dict 1 "cannot be read as a state dict" eval --checkpoint README.md ${eval_common} --devices 2)
tandem_cli_test(eval_wrong_model 1 "does not match model 'mlp': other shape: dense0.weight" eval --checkpoint ${ckpt}/full ${eval_common} --devices 2 --width 64)
set_tests_properties(cli_eval_wrong_model PROPERTIES FIXTURES_REQUIRED ckpt_saved)

# Lending idle cores changes how many BLAS threads multiply, not the numbers: the same loss and
# held-out accuracy with --idle-cores keep and lend (4 devices, 2 micro-batches: stages often
# compute alone). A value other than lend or keep is refused.
set(idle_common train --model mlp --width 512 --blocks 2 --devices 4 --microbatches 2 --batch 128 --steps 3 --eval-batch 5000 --progress none --seed 5)
add_test(NAME cli_idle_cores_same_loss
  COMMAND ${CMAKE_COMMAND} -DKEY=loss
    "-DCMD0=$<TARGET_FILE:tandem_cli>;${idle_common};--idle-cores;keep"
    "-DCMD1=$<TARGET_FILE:tandem_cli>;${idle_common};--idle-cores;lend"
    -P ${CMAKE_CURRENT_LIST_DIR}/same_metric.cmake
  WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(cli_idle_cores_same_loss PROPERTIES TIMEOUT 300)
# With --partition memory and a budget, the plan says whether its planned peaks fit: they do
# not under 1 MiB (and the first step then stops out of memory), they do under 4 MiB.
tandem_cli_test(memory_plan_over_budget 3 "warning: stage 1 on cpu:1 plans [0-9.]+ MiB, above --device-memory 1.0 MiB: expect the first step to stop out of memory.*cpu:1 is out of its 1.0 MiB budget" train --partition memory --device-memory 1MiB --steps 1 --progress none)
tandem_cli_test(memory_plan_within_budget 0 "planned peaks fit --device-memory 4.0 MiB \\(largest: [0-9.]+ MiB on cpu:1\\)" train --partition memory --device-memory 4MiB --steps 1 --progress none)

# --partition fit needs a budget; under 4 MiB, where the parameter split runs out of memory, it
# trains on a split whose plan fits.
tandem_cli_test(partition_fit_needs_a_budget 2 "--partition fit chooses the most even compute among the splits whose plan fits --device-memory: give --device-memory" train --partition fit --steps 1)
tandem_cli_test(partition_fit_trains_within_the_budget 0 "planned peaks fit --device-memory 4.0 MiB.*result: steps=1 " train --model conv3d-stack --convs 8 --filters 16 --data regression --volume 16 --batch 8 --microbatches 8 --devices 4 --partition fit --device-memory 4MiB --steps 1 --test-samples 8 --progress none)
tandem_cli_test(partition_parameters_over_the_same_budget 3 "cpu:[0-9] is out of its 4.0 MiB budget" train --model conv3d-stack --convs 8 --filters 16 --data regression --volume 16 --batch 8 --microbatches 8 --devices 4 --partition parameters --device-memory 4MiB --steps 1 --test-samples 8 --progress none)

# --plan-only prints the placement and the plan of the split that would run, without training:
# status 0 when it fits the budget, 3 when it does not; a --balance split is planned as well.
tandem_cli_test(plan_only_fits 0 "memory plan .*from the FLOPs alone \\(B = 2F, messages free\\): a step takes [0-9.]+x the time of its work spread evenly over the 4 devices \\(bubble 0[.][0-9]+\\)\nplanned peaks fit --device-memory 4.0 MiB" train --plan-only --partition memory --device-memory 4MiB --progress none)
tandem_cli_test(plan_only_over_budget 3 "warning: stage 1 on cpu:1 plans [0-9.]+ MiB, above --device-memory 1.0 MiB" train --plan-only --partition memory --device-memory 1MiB --progress none)
tandem_cli_test(plan_only_when_the_parameters_alone_are_over 3 "warning: stage 0 on cpu:0 plans [0-9.]+ MiB, above --device-memory 1.0 MiB" train --plan-only --model conv3d-stack --convs 8 --filters 64 --data regression --volume 8 --devices 2 --device-memory 1MiB --progress none)
tandem_cli_test(plan_only_of_a_balance 0 "memory plan [^\n]*\n[^\n]*\n0 +flatten..dense0 " train --plan-only --balance 2,2,2,2 --progress none)

# What a run writes at its end is checked at its start: a missing folder ends it at once.
tandem_cli_test(trace_folder_missing 2 "--trace no/such/folder/run.json: the folder no/such/folder does not exist; create it first" train --trace no/such/folder/run.json --steps 1)
tandem_cli_test(report_is_a_folder 2 "--report tests: that is a folder; give a file name" train --report tests --steps 1)
tandem_cli_test(save_dir_under_a_file 2 "--save-dir README.md/ckpt: .*README.md is not a folder" train --save-dir README.md/ckpt --steps 1)
tandem_cli_test(sgd_momentum_out_of_range 2 "--momentum must be in \\[0, 1\\), not -1" train --optimizer sgd --momentum -1 --steps 1)
tandem_cli_test(idle_cores_bad_value 2 "--idle-cores: share not in" train --idle-cores share --steps 1)
tandem_cli_test(mpi_cuda_without_mpi 2 "--mpi-cuda staged chooses how CUDA tensors go between MPI ranks, but this run has no ranks" train --mpi-cuda staged --steps 1)
tandem_cli_test(mpi_cuda_bad_value 2 "--mpi-cuda: gpu not in \\{auto,staged,direct\\}" train --mpi-cuda gpu --steps 1)
