# The command line on ONNX models, as README shows it: export from PyTorch (examples/onnx),
# train split across devices and ranks, consolidate and load into PyTorch, export the trained
# ONNX model (onnx.checker accepts it; tandem eval scores it as the checkpoint), Keras-style
# graphs, and every refusal's exit status.
set(onnx_cli ${PROJECT_BINARY_DIR}/onnx_cli)
set(tandem $<TARGET_FILE:tandem_cli>)
set(examples ${PROJECT_SOURCE_DIR}/examples/onnx)
set(same_metric ${PROJECT_SOURCE_DIR}/tests/cli/same_metric.cmake)
add_test(NAME onnx_cli_clean COMMAND ${CMAKE_COMMAND} -E rm -rf ${onnx_cli})
add_test(NAME onnx_cli_folder COMMAND ${CMAKE_COMMAND} -E make_directory ${onnx_cli})
set_tests_properties(onnx_cli_clean onnx_cli_folder PROPERTIES FIXTURES_SETUP onnx_cli_clean)
set_tests_properties(onnx_cli_folder PROPERTIES DEPENDS onnx_cli_clean)
function(onnx_cli_fixtures test)
  set_tests_properties(${test} PROPERTIES TIMEOUT 600
    FIXTURES_REQUIRED "onnx_fixtures;onnx_cli_clean")
endfunction()

# PyTorch CNN with batch norm on MNIST across 4 devices: the run's own test accuracy, tandem
# eval of its checkpoint, and tandem eval of the exported ONNX file agree exactly; the
# consolidated state dict loads strictly into the PyTorch module; onnx.checker accepts the
# export, whose initializers are the consolidated tensors.
set(cnn ${onnx_cli}/cnn.onnx)
set(eval_same --data mnist --batch 32 --microbatches 4 --eval-batch 5000)
add_test(NAME onnx_cli_pytorch_roundtrip
  COMMAND ${CMAKE_COMMAND} -DKEY=test_accuracy
    "-DCMD0=${TANDEM_PYTHON};${examples}/from_pytorch.py;export;${cnn}"
    "-DCMD1=${tandem};train;--model;${cnn};${eval_same};--progress;none;--devices;4;--steps;3;--save-dir;${onnx_cli}/ckpt"
    "-DCMD2=${tandem};consolidate;${onnx_cli}/ckpt;-o;${onnx_cli}/trained.pt"
    "-DCMD3=${TANDEM_PYTHON};${examples}/from_pytorch.py;load;${onnx_cli}/trained.pt"
    "-DCMD4=${tandem};export;--checkpoint;${onnx_cli}/ckpt;--onnx;${cnn};-o;${onnx_cli}/trained.onnx"
    "-DCMD5=${TANDEM_PYTHON};${onnx_dir}/check_export.py;${onnx_cli}/trained.onnx;${onnx_cli}/trained.pt"
    "-DCMD6=${tandem};eval;--model;${onnx_cli}/trained.onnx;${eval_same};--devices;4"
    "-DCMD7=${tandem};eval;--model;${cnn};--checkpoint;${onnx_cli}/ckpt;${eval_same};--devices;4"
    -P ${same_metric}
  WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
onnx_cli_fixtures(onnx_cli_pytorch_roundtrip)

# The same model under mpirun -n 2 (one stage per rank): its consolidated weights load into
# PyTorch, and tandem eval in one process scores its checkpoint as the ranks did.
if(TANDEM_WITH_MPI)
  add_test(NAME onnx_cli_pytorch_mpi_n2
    COMMAND ${CMAKE_COMMAND} -DKEY=test_accuracy
      "-DCMD0=${TANDEM_PYTHON};${examples}/from_pytorch.py;export;${onnx_cli}/cnn_mpi.onnx"
      "-DCMD1=${TANDEM_MPIRUN};-n;2;${tandem};train;--model;${onnx_cli}/cnn_mpi.onnx;${eval_same};--progress;none;--steps;2;--save-dir;${onnx_cli}/mpi_ckpt"
      "-DCMD2=${tandem};consolidate;${onnx_cli}/mpi_ckpt;-o;${onnx_cli}/mpi_trained.pt"
      "-DCMD3=${TANDEM_PYTHON};${examples}/from_pytorch.py;load;${onnx_cli}/mpi_trained.pt"
      "-DCMD4=${tandem};eval;--model;${onnx_cli}/cnn_mpi.onnx;--checkpoint;${onnx_cli}/mpi_ckpt;${eval_same};--devices;2"
      -P ${same_metric}
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  onnx_cli_fixtures(onnx_cli_pytorch_mpi_n2)
  set_tests_properties(onnx_cli_pytorch_mpi_n2 PROPERTIES LABELS mpi)
endif()

# A 3D U-Net with instance norm on the spheres volumes, Dice + BCE with the final Sigmoid taken
# into the loss, on 2 devices with recomputation, a zero-bubble schedule and a trace; and the
# memory plan of an ONNX model.
set(unet ${onnx_fixtures}/unet3d.onnx)
set(unet_run train --model ${unet} --data spheres --volume 8 --loss dice+bce --batch 4
  --train-samples 8 --test-samples 4 --progress none)
function(onnx_cli_test name status match)
  add_test(NAME onnx_cli_${name}
    COMMAND ${CMAKE_COMMAND} "-DCMD=${tandem};${ARGN}" -DSTATUS=${status} "-DMATCH=${match}"
            -P ${PROJECT_SOURCE_DIR}/tests/cli/expect_exit.cmake
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  onnx_cli_fixtures(onnx_cli_${name})
endfunction()
onnx_cli_test(unet_trains 0 "result: steps=2 loss=[0-9.]+ test_dice=[0-9.]+ " ${unet_run}
  --devices 2 --microbatches 2 --steps 2 --recompute stage --schedule zb-h1
  --trace ${onnx_cli}/unet_trace.json)
onnx_cli_test(unet_plan_only 0 "memory plan .*planned peaks fit --device-memory" ${unet_run}
  --devices 2 --microbatches 2 --partition memory --device-memory 64MiB --plan-only)
# A spatial split of the ONNX U-Net trains as one device does on whole samples, alone, under
# pipeline stages and on MPI ranks (spatial_equals_whole.cmake), and so does a channels-last
# Keras U-Net; a graph that reaches across the depth (the Keras MNIST graph flattens it into
# its features) and more slabs than the depth allows are refused.
set(spatial_mpirun "")
if(TANDEM_WITH_MPI)
  set(spatial_mpirun ${TANDEM_MPIRUN})
endif()
add_test(NAME onnx_cli_spatial_equals_whole
  COMMAND ${CMAKE_COMMAND} -DTANDEM=${tandem} -DPYTHON=${TANDEM_PYTHON} -DMODEL=${unet}
          -DDIR=${onnx_cli}/spatial "-DMPIRUN=${spatial_mpirun}"
          -P ${onnx_dir}/spatial_equals_whole.cmake
  WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
onnx_cli_fixtures(onnx_cli_spatial_equals_whole)
add_test(NAME onnx_cli_keras_unet_spatial_equals_whole
  COMMAND ${CMAKE_COMMAND} -DTANDEM=${tandem} -DPYTHON=${TANDEM_PYTHON}
          -DMODEL=${onnx_fixtures}/keras_unet3d.onnx -DDIR=${onnx_cli}/keras_spatial "-DRUNS=s2;staged"
          -P ${onnx_dir}/spatial_equals_whole.cmake
  WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
onnx_cli_fixtures(onnx_cli_keras_unet_spatial_equals_whole)
# tandem verify on the Keras U-Net's slabs under two stages: every parameter agrees.
onnx_cli_test(keras_unet_verify_spatial_stages 0 "result: verified parameters=12 steps=1"
  verify --model ${onnx_fixtures}/keras_unet3d.onnx --data spheres --volume 8 --loss dice+bce
  --batch 4 --microbatches 2 --train-samples 8 --test-samples 0 --devices 4 --spatial 2)
onnx_cli_test(spatial_refuses_a_graph_across_the_depth 2 "--spatial 2 cuts every sample into depth slabs, but ONNX node '[^']+' \\(Reshape\\) cannot run on slabs: its shape \\[-1,784\\] merges the depth \\(axis 1 of \\[-1,14,14,4\\]\\)"
  train --model ${onnx_fixtures}/keras.onnx --data mnist --devices 2 --spatial 2 --steps 1)
# A plan over the budget names the --spatial under which an ONNX model's slabs would fit (2 or
# 4 at this 8³ volume: a slab's weight gradient holds both halo edge pieces at once).
onnx_cli_test(plan_names_a_spatial_that_fits 3 "above --device-memory 360.0 KiB.*\n--spatial ([24]) would plan at most [0-9.]+ KiB per device \\([24] devices: 1 group of [24]\\), within the budget"
  ${unet_run} --microbatches 1 --devices 1 --plan-only --partition memory --device-memory 360KiB)
onnx_cli_test(spatial_too_many_slabs 2 "--volume 8 with model [^ ]+unet3d.onnx and --spatial 8: 8 slabs of at least 2 planes need a depth of at least 16; use --volume 16 or more, or --spatial 4 or fewer"
  ${unet_run} --microbatches 2 --devices 8 --spatial 8 --steps 1)
# A U-Net without --loss: cross-entropy wants a class per sample; the loss is what to change.
onnx_cli_test(unet_without_a_volume_loss 2 "--data spheres gives 0/1 masks, but model [^ ]+unet3d.onnx with --loss cross-entropy \\(the default\\) needs class labels: give --loss dice or dice\\+bce \\(0/1 masks\\) or mse"
  train --model ${unet} --data spheres --volume 8 --steps 1 --progress none)
# A graph for volumes of any size whose 3 poolings need a multiple of 8: 60 is refused at start,
# naming the node ONNX's shape inference stops at and the sizes that fit.
onnx_cli_test(volume_the_graph_cannot_take 2 "model [^ ]+unet.onnx cannot take samples of shape \\[1,60,60,60\\]: ONNX's shape inference at that size stops at ONNX node '/Concat' \\(Concat\\): Can't merge shape info.*Source=15 Target=14.*; use --volume 56 or 64"
  train --model ${onnx_fixtures}/plan/unet.onnx --data spheres --volume 60 --loss dice --batch 2
  --microbatches 1 --steps 1 --progress none)
onnx_cli_test(unet_volume_mismatch 2 "takes samples of shape \\[1,8,8,8\\].*data gives samples of shape \\[1,16,16,16\\]"
  train --model ${unet} --data spheres --volume 16 --loss dice --steps 1 --progress none)

# Folders of one's own (tests/data/make_fixtures.py, the data_folders fixture of the CLI
# tests): the ONNX U-Net on 8^3 crops of the MRI written as a NIfTI pair, and an npy folder
# whose samples do not fit the ONNX MLP's [3,4] input, found at start.
onnx_cli_test(unet_nifti 0 "result: steps=2 loss=[0-9.]+ test_dice=none "
  train --model ${unet} --data nifti:${fx}/ch2 --test-files 0 --volume 8 --loss dice+bce
  --batch 4 --train-samples 8 --devices 2 --microbatches 2 --steps 2 --progress none)
onnx_cli_test(npy_shape_mismatch 2 "takes samples of shape \\[3,4\\].*data gives samples of shape \\[6,6\\]"
  train --model ${onnx_fixtures}/mlp.onnx --data npy:${fx}/npy_mlp --classes 3 --batch 8
  --microbatches 2 --steps 1 --progress none)
set_tests_properties(onnx_cli_unet_nifti onnx_cli_npy_shape_mismatch PROPERTIES
  FIXTURES_REQUIRED "onnx_fixtures;onnx_cli_clean;data_folders")

# An ONNX 3D model with mean squared error on an npy folder of volumes: its [C,D,H,W] samples
# make it a volume model whatever the loss (refused as needing class labels before). It trains,
# on one device and on 2 stages with the same held-out error.
set(npy_mse train --model ${unet} --loss mse --data npy:${onnx_cli}/npy_volumes --batch 4
  --microbatches 2 --steps 2 --progress none)
add_test(NAME onnx_cli_npy_volumes_mse
  COMMAND ${CMAKE_COMMAND} -DKEY=test_mse
    "-DCMD0=${TANDEM_PYTHON};${onnx_dir}/npy_volumes.py;${onnx_cli}/npy_volumes"
    "-DCMD1=${tandem};${npy_mse};--devices;1"
    "-DCMD2=${tandem};${npy_mse};--devices;2"
    -P ${same_metric}
  WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
onnx_cli_fixtures(onnx_cli_npy_volumes_mse)

# A graph as tf2onnx writes a Keras model (NHWC input, Transposes, Gemm with the kernel
# transposed, Softmax): MNIST's [B,1,28,28] feeds its [B,28,28,1], and it learns (after 60
# steps of Adam, far above the 0.1 of guessing: 0.64 here).
add_test(NAME onnx_cli_keras_trains
  COMMAND ${CMAKE_COMMAND} "-DCMD=${tandem};train;--model;${onnx_fixtures}/keras.onnx;--data;mnist;--devices;2;--microbatches;2;--batch;64;--steps;60;--eval-batch;5000;--progress;none"
          -DSTATUS=0 "-DMATCH=result: steps=60 loss=[0-9.]+ test_accuracy=0[.][5-9]"
          -P ${PROJECT_SOURCE_DIR}/tests/cli/expect_exit.cmake
  WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
onnx_cli_fixtures(onnx_cli_keras_trains)

# Refusals end the run at start with status 2, naming node, operator and the supported ones.
onnx_cli_test(refuses_unsupported_operator 2
  "ONNX node 'hardmax0' uses operator 'Hardmax', which tandem does not run; tandem runs Add, "
  train --model ${onnx_fixtures}/refused/unsupported_operator.onnx --steps 1)
foreach(refusal "second_input;a second graph input 'x2'"
                "reshape_fixed_batch;fixes axis 0, the batch"
                "reshape_by_batched_tensor;a dynamic shape tandem cannot resolve"
                "batch_size_arithmetic;computes with the batch size"
                "opset_18;tandem reads opsets 11 to 17"
                "tied_weights;tied weights are not supported"
                "two_outputs;name the one the loss reads with --output"
                "not_onnx;is not an ONNX model")
  list(GET refusal 0 name)
  list(GET refusal 1 match)
  onnx_cli_test(refuses_${name} 2 "${match}"
    train --model ${onnx_fixtures}/refused/${name}.onnx --loss mse --steps 1)
endforeach()
onnx_cli_test(refuses_unknown_loss 2 "--loss hinge is unknown; use cross-entropy, dice, dice\\+bce, mse"
  train --model ${onnx_fixtures}/mlp.onnx --loss hinge --steps 1)
onnx_cli_test(loss_of_a_builtin_model 2 "--loss and --output choose the loss of a model from an ONNX file"
  train --model mlp --loss mse --steps 1)
onnx_cli_test(eval_builtin_needs_checkpoint 2 "eval needs --checkpoint" eval --model mlp)
onnx_cli_test(export_missing_checkpoint 2 "no/such/ckpt: no such file or folder"
  export --checkpoint no/such/ckpt --onnx ${onnx_fixtures}/mlp.onnx -o ${onnx_cli}/x.onnx)

# The memory plan holds for ONNX models as a user meets it (plan_check.py): no device goes
# above its stage's planned peak "at most", and the planned peak is within 10% of the measured
# one (1 MiB for models of a few MiB). A user's PyTorch U-Net (8 to 64 filters, transposed
# convolutions, concatenated skips) on one device, 2 and 4 slabs and 2 stages; the suite's U-Net
# with instance norm, also slabs under stages; the Keras graph of MNIST on 1 and 2 stages.
set(plan_check ${TANDEM_PYTHON} ${onnx_dir}/plan_check.py ${tandem} --)
set(plan_volume --data spheres --test-samples 0 --seed 0 --loss dice+bce)
add_test(NAME onnx_plan_unet
  COMMAND ${plan_check} --model ${onnx_fixtures}/plan/unet.onnx ${plan_volume} --volume 48
    --batch 2 --microbatches 1 --train-samples 4 -- --devices 1 -- --devices 2 --spatial 2
    -- --devices 4 --spatial 4 -- --devices 2 --stages 2)
add_test(NAME onnx_plan_unet_instance_norm
  COMMAND ${plan_check} --model ${onnx_fixtures}/plan/unet_small.onnx ${plan_volume} --volume 32
    --batch 4 --microbatches 2 --train-samples 8 -- --devices 1 -- --devices 2 --spatial 2
    -- --devices 2 --stages 2 -- --devices 4 --stages 2 --spatial 2)
# The same U-Net in bf16 (skipped, status 77, where the kernels compute no bf16), on even
# parameter counts: the split by measured time plans its first of 2 stages 11% above the
# measured peak.
add_test(NAME onnx_plan_unet_bf16
  COMMAND ${plan_check} --model ${onnx_fixtures}/plan/unet.onnx ${plan_volume} --volume 48
    --batch 2 --microbatches 1 --train-samples 4 --cpu-kernels native --precision bf16
    --partition parameters
    -- --devices 1 -- --devices 2 --spatial 2 -- --devices 4 --spatial 4 -- --devices 2 --stages 2)
set_tests_properties(onnx_plan_unet_bf16 PROPERTIES SKIP_RETURN_CODE 77)
# The Keras graph keeps even parameter counts: the split by measured time puts its convolution
# alone on stage 0, and the stage after it measures up to 29% above its plan (to be planned).
add_test(NAME onnx_plan_keras
  COMMAND ${plan_check} --model ${onnx_fixtures}/keras.onnx --data mnist --batch 32
    --microbatches 2 --eval-batch 32 --seed 0 --partition parameters -- --devices 1
    -- --devices 2)
# And its advice holds at 64^3 under 128 MiB per device: one device plans above it and names
# --spatial 2, which then trains within it; --partition fit finds 4 stages whose plan fits it,
# and they train within it.
set(plan_unet_64 train --model ${onnx_fixtures}/plan/unet.onnx ${plan_volume} --volume 64
  --batch 2 --microbatches 1 --train-samples 4 --steps 2 --progress none --device-memory 128MiB)
onnx_cli_test(plan_names_a_spatial_that_trains 3
  "--spatial 2 would plan at most [0-9.]+ MiB per device \\(2 devices: 1 group of 2\\), within the budget"
  ${plan_unet_64} --devices 1 --partition memory --plan-only)
onnx_cli_test(plan_spatial_named_trains 0 "result: steps=2 " ${plan_unet_64} --devices 2
  --spatial 2)
onnx_cli_test(plan_fit_trains_within_the_budget 0
  "planned peaks fit --device-memory 128.0 MiB.*result: steps=2 "
  ${plan_unet_64} --devices 4 --partition fit)
foreach(test onnx_plan_unet onnx_plan_unet_bf16 onnx_plan_unet_instance_norm onnx_plan_keras)
  set_tests_properties(${test} PROPERTIES WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  onnx_cli_fixtures(${test})
endforeach()

# tandem predict on whole scans as a user runs it (predict_check.py): a PyTorch U-Net exported
# with dynamic D, H, W predicts an odd NIfTI grid as PyTorch's forward of the padded scan, on
# 1 device, 2 and 3 slabs, 2 stages, 2 stages of 2 slabs and 2 MPI ranks; nibabel reads the
# results on the scan's grid; .npy scans and folders; refusals with status 2.
set(predict_mpirun "")
if(TANDEM_WITH_MPI)
  set(predict_mpirun ${TANDEM_MPIRUN})
endif()
add_test(NAME onnx_cli_predict
  COMMAND ${TANDEM_PYTHON} ${onnx_dir}/predict_check.py ${tandem} ${onnx_cli}/predict
    ${predict_mpirun}
  WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
onnx_cli_fixtures(onnx_cli_predict)
# predict --plan-only: the grid, the windows, the placement and the planned peak, no forward; over
# --device-memory, status 3 naming what fits. A scan of a channel count the model does not take:
# status 2 before any work, naming the file.
set(plan_unet predict --model ${onnx_fixtures}/plan/unet.onnx --loss dice)
onnx_cli_test(predict_plan_only 0 "slab.*planes 0:24 of 40.*planes 24:40 of 40.*plan: file=[^ ]+scan40.npy shape=40x40x40 padded=40x40x40 windows=1 window=40x40x40 planned_peak=[0-9]+"
  ${plan_unet} --input ${onnx_fixtures}/plan/scan40.npy --output ${onnx_cli}/not_written.npy
  --plan-only --devices 2 --spatial 2)
onnx_cli_test(predict_plan_only_over_budget 3 "scan40.npy: predicting the scan in one piece \\(40x40x40\\) plans [0-9.]+ MiB .* over --device-memory 8.0 MiB\\. --spatial [0-9]+ would plan"
  ${plan_unet} --input ${onnx_fixtures}/plan/scan40.npy --output ${onnx_cli}/not_written.npy
  --plan-only --devices 1 --device-memory 8MiB)
onnx_cli_test(predict_channels_the_model_does_not_take 2 "two_channels.npy: the scan has 2 channels, but model [^ ]+unet.onnx takes 1: give scans of 1 channel"
  ${plan_unet} --input ${onnx_fixtures}/plan/two_channels.npy --output ${onnx_cli}/never.npy)

# --normalize on npy:DIR: `none` trains the weights PyTorch trains on the arrays as stored,
# `dataset` (the default) those of the arrays standardized with train_x's moments, and each
# checkpoint records its own, so that tandem eval scores it the same; the dataset record keeps
# the training's moments after train_x changes.
set(npy_norm ${onnx_cli}/npy_normalize)
set(npy_norm_check ${onnx_dir}/npy_normalize_check.py)
set(npy_norm_train train --model ${onnx_fixtures}/mlp.onnx --classes 5 --optimizer sgd
  --momentum 0 --lr 0.1 --lr-schedule constant --batch 12 --steps 3 --devices 2
  --microbatches 2 --progress none)
# The eval's batch is the default 64, more than the 12 training samples: it trains nothing.
set(npy_norm_eval eval --model ${onnx_fixtures}/mlp.onnx --classes 5 --devices 2 --microbatches 2)
foreach(mode none dataset)
  set(d ${npy_norm}_${mode})
  add_test(NAME onnx_cli_npy_normalize_${mode}
    COMMAND ${CMAKE_COMMAND} -DKEY=test_accuracy
      "-DCMD0=${TANDEM_PYTHON};${npy_norm_check};write;${d}"
      "-DCMD1=${tandem};${npy_norm_train};--data;npy:${d};--normalize;${mode};--save-dir;${d}/ckpt"
      "-DCMD2=${tandem};consolidate;${d}/ckpt;-o;${d}/trained.pt"
      "-DCMD3=${TANDEM_PYTHON};${npy_norm_check};check;${d};${d}/trained.pt;${mode}"
      "-DCMD4=${TANDEM_PYTHON};${npy_norm_check};perturb;${d}"
      "-DCMD5=${tandem};${npy_norm_eval};--data;npy:${d};--checkpoint;${d}/ckpt"
      -P ${same_metric}
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  onnx_cli_fixtures(onnx_cli_npy_normalize_${mode})
endforeach()
