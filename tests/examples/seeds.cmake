# examples/seeds/: three users' own models, small, run end to end as each script's docstring
# runs them: export, tandem verify of the split (status 0, the parameters of the last stage's
# layers with forward and backward on its device), a short training saved, consolidate, tandem
# predict of a fixed sample, and the script's load: strict, the weights moved from the exported
# ones, and the module's forward on the sample equal to tandem predict's within 1e-5 (the Keras
# U-Net: a forward in Keras's terms from the weights in get_weights order, against the graph's
# forward and tandem predict's). Each user's steps run in order (each a fixture of the next);
# the three users in parallel.
set(seeds ${PROJECT_BINARY_DIR}/seeds)
set(seeds_py ${PROJECT_SOURCE_DIR}/examples/seeds)
set(seeds_tandem $<TARGET_FILE:tandem_cli>)
# seeds_steps(USER) starts a user's chain with a clean folder ${seeds}/USER; then
# seeds_step(USER STEP MATCH COMMAND...) adds seeds_USER_STEP, which runs COMMAND after the
# user's previous step and must exit 0 with output matching MATCH.
function(seeds_steps user)
  add_test(NAME seeds_${user}_clean COMMAND ${CMAKE_COMMAND} -E rm -rf ${seeds}/${user})
  set_tests_properties(seeds_${user}_clean PROPERTIES TIMEOUT 30
                       FIXTURES_SETUP seeds_${user}_clean)
  set(seeds_${user}_last clean PARENT_SCOPE)
endfunction()
function(seeds_step user step match)
  add_test(NAME seeds_${user}_${step}
    COMMAND ${CMAKE_COMMAND} "-DCMD=${ARGN}" -DSTATUS=0 "-DMATCH=${match}"
            -P ${PROJECT_SOURCE_DIR}/tests/cli/expect_exit.cmake
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(seeds_${user}_${step} PROPERTIES TIMEOUT 120
    FIXTURES_REQUIRED seeds_${user}_${seeds_${user}_last} FIXTURES_SETUP seeds_${user}_${step})
  set(seeds_${user}_last ${step} PARENT_SCOPE)
endfunction()

# 1. A stack of Conv3D layers regressing volumes (MSE) on an npy folder, on 2 devices: 10
# convolutions of 8 filters and a 1x1x1 one (22 tensors), 8^3 volumes.
set(d ${seeds}/stack)
set(stack --model ${d}/stack.onnx --loss mse --data npy:${d}/volumes --devices 2 --batch 4
    --microbatches 2)
seeds_steps(stack)
seeds_step(stack export "wrote .*scan.npy" ${TANDEM_PYTHON} ${seeds_py}/conv3d_stack.py export
  ${d}/stack.onnx --small --arrays ${d}/volumes --sample ${d}/scan.npy)
seeds_step(stack verify "out.weight +1 +cpu:1 +cpu:1 .*result: verified parameters=22 steps=1"
  ${seeds_tandem} verify ${stack})
seeds_step(stack train "placement log.*result: steps=4 loss=[0-9.]+ test_mse=[0-9.]+ "
  ${seeds_tandem} train ${stack} --steps 4 --log-placement --progress none --save-dir ${d}/run)
seeds_step(stack consolidate "" ${seeds_tandem} consolidate ${d}/run -o ${d}/trained.pt)
seeds_step(stack predict "result: file=" ${seeds_tandem} predict --model ${d}/stack.onnx
  --loss mse --checkpoint ${d}/run --devices 2 --input ${d}/scan.npy
  --output ${d}/predicted.npy --standardize none)
seeds_step(stack load "22 tensors, 22 moved.*forward on .* equals " ${TANDEM_PYTHON}
  ${seeds_py}/conv3d_stack.py load ${d}/trained.pt --small --sample ${d}/scan.npy
  --predicted ${d}/predicted.npy)

# 2. The Keras U-Net as tf2onnx writes it (filters 4, 8, 16; 20 tensors) on 16^3 spheres in 2
# depth slabs, and under 2 stages of 2 slabs.
set(d ${seeds}/unet)
set(unet --model ${d}/unet.onnx --loss dice+bce --data spheres --volume 16 --train-samples 4
    --batch 2 --microbatches 2)
seeds_steps(unet)
seeds_step(unet export "wrote .*scan.npy" ${TANDEM_PYTHON} ${seeds_py}/keras_unet.py export
  ${d}/unet.onnx --small --sample ${d}/scan.npy)
seeds_step(unet verify
  "conv3d_7/BiasAdd/[^ ]+ +1 +cpu:2,cpu:3 +cpu:2,cpu:3 .*result: verified parameters=20 steps=1"
  ${seeds_tandem} verify ${unet} --test-samples 0 --devices 4 --spatial 2)
seeds_step(unet train "placement log.*result: steps=3 loss=[0-9.]+ test_dice=[0-9.]+ "
  ${seeds_tandem} train ${unet} --test-samples 2 --devices 2 --spatial 2 --steps 3
  --log-placement --progress none --save-dir ${d}/run)
seeds_step(unet consolidate "" ${seeds_tandem} consolidate ${d}/run -o ${d}/trained.pt)
seeds_step(unet predict "result: file=" ${seeds_tandem} predict --model ${d}/unet.onnx
  --loss dice+bce --checkpoint ${d}/run --devices 2 --spatial 2 --input ${d}/scan.npy
  --output ${d}/predicted.npy --standardize none)
seeds_step(unet load "20 tensors, 20 moved.*equals the graph's forward.*equals .*predicted.npy"
  ${TANDEM_PYTHON} ${seeds_py}/keras_unet.py load ${d}/trained.pt --small --sample ${d}/scan.npy
  --predicted ${d}/predicted.npy --keras-weights ${d}/unet_keras.npz)

# 3. The MNIST MLP of blocks with dropout (width 32, 2 hidden blocks; 8 tensors) in 4 stages,
# one block each: verified in one process, trained with Adam under mpirun -n 4 (one stage per
# rank; 4 in-process devices without MPI).
set(d ${seeds}/mlp)
set(mlp --model ${d}/mlp.onnx --data mnist --batch 32 --microbatches 4 --balance 4,3,3,1)
seeds_steps(mlp)
seeds_step(mlp export "wrote .*images.npy" ${TANDEM_PYTHON} ${seeds_py}/mnist_mlp.py export
  ${d}/mlp.onnx --small --sample ${d}/images.npy)
seeds_step(mlp verify "head.weight +3 +cpu:3 +cpu:3 .*result: verified parameters=8 steps=1"
  ${seeds_tandem} verify ${mlp} --devices 4)
set(mlp_train train ${mlp} --optimizer adam --lr 1e-3 --steps 5 --eval-batch 5000 --progress none
    --save-dir ${d}/run)
if(TANDEM_WITH_MPI)
  seeds_step(mlp train "result: steps=5 loss=[0-9.]+ test_accuracy=[0-9.]+ "
    ${TANDEM_MPIRUN} -n 4 ${seeds_tandem} ${mlp_train} --comm-timeout 60)
  set_tests_properties(seeds_mlp_train PROPERTIES LABELS mpi PROCESSORS 2)
else()
  seeds_step(mlp train "result: steps=5 loss=[0-9.]+ test_accuracy=[0-9.]+ "
    ${seeds_tandem} ${mlp_train} --devices 4)
endif()
seeds_step(mlp consolidate "" ${seeds_tandem} consolidate ${d}/run -o ${d}/trained.pt)
seeds_step(mlp predict "result: file=[^ ]+ images=16 " ${seeds_tandem} predict --model ${d}/mlp.onnx
  --checkpoint ${d}/run --devices 2 --input ${d}/images.npy --output ${d}/probabilities.npy
  --standardize none)
seeds_step(mlp load "8 tensors, 8 moved.*softmax on .* equals " ${TANDEM_PYTHON}
  ${seeds_py}/mnist_mlp.py load ${d}/trained.pt --small --sample ${d}/images.npy
  --predicted ${d}/probabilities.npy)
