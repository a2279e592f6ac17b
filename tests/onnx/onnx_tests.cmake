# The ONNX part's tests. fixtures.py makes every model and data file with Debian's python3-torch
# and python3-onnx into onnx_fixtures/ (the onnx_fixtures test, first); the other tests need it.
set(onnx_fixtures ${PROJECT_BINARY_DIR}/onnx_fixtures)
set(onnx_dir ${CMAKE_CURRENT_LIST_DIR})

# A Python that imports torch and onnx: $TANDEM_PYTHON, python3 on PATH, or Debian's.
set(TANDEM_PYTHON "" CACHE FILEPATH "Python with torch and onnx for the ONNX tests (empty: find one)")
if(NOT TANDEM_PYTHON)
  foreach(candidate $ENV{TANDEM_PYTHON} python3 /usr/bin/python3)
    find_program(_python NAMES ${candidate} NO_CACHE)
    if(_python)
      execute_process(COMMAND ${_python} -c "import torch, onnx" RESULT_VARIABLE rc
                      OUTPUT_QUIET ERROR_QUIET)
      if(rc EQUAL 0)
        set(TANDEM_PYTHON ${_python})
        break()
      endif()
    endif()
    unset(_python)
  endforeach()
endif()
if(TANDEM_PYTHON)
  add_test(NAME onnx_fixtures
    COMMAND ${CMAKE_COMMAND} -E env PYTHONWARNINGS=ignore
            ${TANDEM_PYTHON} ${onnx_dir}/fixtures.py ${onnx_fixtures})
else()
  message(WARNING "tandem: no Python with torch and onnx (Debian: python3-torch python3-onnx, "
    "installed by scripts/setup): the ONNX tests will fail at their fixtures")
  add_test(NAME onnx_fixtures COMMAND ${CMAKE_COMMAND} -E false)
  set(TANDEM_PYTHON python3)
endif()
set_tests_properties(onnx_fixtures PROPERTIES FIXTURES_SETUP onnx_fixtures TIMEOUT 300)

# The library: operators, exported models, refusals, export (GoogleTest).
file(GLOB onnx_test_srcs CONFIGURE_DEPENDS ${onnx_dir}/*_test.cc)
add_executable(test_onnx ${onnx_test_srcs})
target_link_libraries(test_onnx PRIVATE tandem_onnx tandem_runtime GTest::gtest GTest::gtest_main
  Threads::Threads)
target_compile_definitions(test_onnx PRIVATE TANDEM_ONNX_FIXTURES="${onnx_fixtures}")
tandem_torch_pch(test_onnx)
tandem_warnings(test_onnx)
# One CTest entry for the binary, like tandem_test's (LibTorch starts once, not once per case).
add_test(NAME test_onnx
  COMMAND test_onnx --gtest_output=xml:${PROJECT_BINARY_DIR}/test-results/test_onnx.xml
  WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(test_onnx PROPERTIES TIMEOUT 600 FIXTURES_REQUIRED onnx_fixtures)

# Training equals PyTorch's: K steps of SGD on 1, 2 and 4 in-process devices (1F1B; uneven
# micro-batches: 10 samples in 3, 5 in 2; one micro-batch for the batch-norm model, whose
# gradients equal one device's only then) and on 2 MPI ranks.
add_executable(onnx_train_driver ${onnx_dir}/train_driver.cc)
target_link_libraries(onnx_train_driver PRIVATE tandem)
tandem_torch_pch(onnx_train_driver)
tandem_warnings(onnx_train_driver)
set(onnx_train ${onnx_dir}/train_check.sh $<TARGET_FILE:onnx_train_driver> ${TANDEM_PYTHON}
  ${onnx_fixtures})
foreach(model "mlp;cross-entropy;3" "cnn_bn;cross-entropy;1" "unet3d;dice+bce;2"
              "blocks;cross-entropy;2")
  list(GET model 0 name)
  list(GET model 1 loss)
  list(GET model 2 microbatches)
  foreach(devices 1 2 4)
    add_test(NAME onnx_train_${name}_${devices}_devices
      COMMAND ${onnx_train} ${name} ${loss} ${devices} ${microbatches})
    set_tests_properties(onnx_train_${name}_${devices}_devices PROPERTIES TIMEOUT 300
      FIXTURES_REQUIRED onnx_fixtures)
  endforeach()
  if(TANDEM_WITH_MPI)
    add_test(NAME onnx_train_${name}_mpi_n2
      COMMAND ${onnx_train} ${name} ${loss} 2 ${microbatches} ${TANDEM_MPIRUN} -n 2)
    set_tests_properties(onnx_train_${name}_mpi_n2 PROPERTIES TIMEOUT 300 LABELS mpi
      FIXTURES_REQUIRED onnx_fixtures)
  endif()
endforeach()
