# tandem verify: correct splits agree with one device on the whole batch (status 0), and each
# fault it is meant to catch ends in status 1 naming the first parameter that moved, its layer
# and stage: a gradient message that arrives as zeros, a micro-batch whose backward does not
# run, a halo of zeros.
set(verify_mlp verify --model mlp --width 32 --blocks 2 --batch 32 --microbatches 4)
set(verify_unet verify --model unet3d --levels 2 --filters 4 --data spheres --volume 16 --batch 4
    --train-samples 8 --test-samples 0 --microbatches 2)
tandem_cli_test(verify_stages 0 "result: verified parameters=12 steps=1" ${verify_mlp} --devices 4)
tandem_cli_test(verify_zb_v_three_steps 0 "result: verified parameters=12 steps=3" ${verify_mlp}
                --devices 2 --schedule zb-v --steps 3)
tandem_cli_test(verify_spatial_stages_zb_h1 0 "result: verified parameters=16 steps=1"
                ${verify_unet} --devices 4 --spatial 2 --schedule zb-h1)
tandem_cli_test(verify_spatial_recompute_gpipe 0 "result: verified parameters=16 steps=2"
                ${verify_unet} --devices 3 --spatial 3 --schedule gpipe --recompute stage
                --steps 2)
tandem_cli_test(verify_zeroed_gradient_message 1
                "result: differs first=dense0.weight layer=dense0 stage=1 "
                ${verify_mlp} --devices 4 --inject-fault zero:grad=1,mb=0 --balance 1,1,1,5)
tandem_cli_test(verify_skipped_backward 1
                "result: differs first=dense0.weight layer=dense0 stage=1 "
                ${verify_mlp} --devices 4 --inject-fault skip-backward:stage=1,mb=1
                --balance 1,1,1,5 --schedule gpipe)
tandem_cli_test(verify_zeroed_halo 1
                "result: differs first=enc0.conv0.weight layer=enc0.conv0 stage=0 "
                ${verify_unet} --devices 2 --spatial 2 --inject-fault zero:from=0,to=1,grad=0)
tandem_cli_test(verify_bad_fault 2 "fault 'skip-backward:stage=9,mb=0': give skip-backward"
                ${verify_mlp} --devices 4 --inject-fault skip-backward:stage=9,mb=0)
# tandem verify exits 0 on the configurations of the equivalence tests (verify_matrix.cmake).
add_test(NAME cli_verify_equivalence_matrix
  COMMAND ${CMAKE_COMMAND} -DTANDEM=$<TARGET_FILE:tandem_cli> -P ${CMAKE_CURRENT_LIST_DIR}/verify_matrix.cmake
  WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(cli_verify_equivalence_matrix PROPERTIES TIMEOUT 600)
