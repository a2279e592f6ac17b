# Faults injected into one message of a 2-rank job (faults_main.cc). Included by
# tests/mpi/CMakeLists.txt it builds test_mpi_faults and registers one check per fault; run with
# `cmake -P` (as the registered tests do) it is the check: the job must end by itself with a
# non-zero status, and the rank that noticed the fault must have printed, with its prefix, the
# step, device, stage, action and micro-batch, then the cause; that rank never completes its
# step. The in-process counterpart is tests/runtime/faults_test.cc.
if(CMAKE_SCRIPT_MODE_FILE)
  string(REPLACE "|" ";" mpirun "${MPIRUN}")
  execute_process(COMMAND ${mpirun} -n 2 ${PROGRAM} ${FAULT} ${TIMEOUT_S}
    RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 150)
  message("${out}${err}")
  message("mpirun status: ${status}")
  if(NOT status MATCHES "^[0-9]+$")
    message(FATAL_ERROR "the job did not end by itself: ${status}")
  endif()
  if(status EQUAL 0)
    message(FATAL_ERROR "the job with fault ${FAULT} exited with status 0")
  endif()
  set(want "[r${RANK}/2] step 0 failed on device ${RANK} (cpu:${RANK}), stage ${RANK}, action ${ACTION} (micro-batch ${MB}): ${CAUSE}")
  string(FIND "${out}${err}" "${want}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "the output lacks '${want}'")
  endif()
  string(FIND "${out}${err}" "[r${RANK}/2] step done" at)
  if(NOT at EQUAL -1)
    message(FATAL_ERROR "rank ${RANK} completed the step that failed")
  endif()
else()
  if(NOT TARGET test_mpi_faults)
    add_executable(test_mpi_faults ${CMAKE_CURRENT_LIST_DIR}/faults_main.cc)
    target_link_libraries(test_mpi_faults PRIVATE tandem)
    tandem_torch_pch(test_mpi_faults)
    tandem_warnings(test_mpi_faults)
  endif()
  string(REPLACE ";" "|" tandem_mpirun_joined "${TANDEM_MPIRUN}")
  # tandem_mpi_fault(NAME FAULT COMM_TIMEOUT_S RANK ACTION MB CAUSE): RANK notices FAULT at
  # ACTION of micro-batch MB; its report continues with CAUSE. Device 1 receives both forwards
  # before it sends a gradient and receives nothing after, so a lost gradient leaves rank 0 the
  # only rank waiting: the rank that notices is known for every case.
  function(tandem_mpi_fault name fault timeout rank action mb cause)
    add_test(NAME test_mpi_fault_${name}${TANDEM_MPI_SUFFIX}
      COMMAND ${CMAKE_COMMAND} -DMPIRUN=${tandem_mpirun_joined} -DPROGRAM=$<TARGET_FILE:test_mpi_faults>
              -DFAULT=${fault} -DTIMEOUT_S=${timeout} -DRANK=${rank} -DACTION=${action} -DMB=${mb}
              "-DCAUSE=${cause}" -P ${CMAKE_CURRENT_FUNCTION_LIST_FILE}
      WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
    set_tests_properties(test_mpi_fault_${name}${TANDEM_MPI_SUFFIX} PROPERTIES TIMEOUT 180
                         LABELS "${TANDEM_MPI_LABELS}")
  endfunction()
  # 5 s: far beyond what any message that is sent takes here; waited out by lost messages only.
  tandem_mpi_fault(drop "drop:grad=1,mb=0" 5 0 "0B0<1" 0 "[r0/2] rank 0 waited 5 s for message '")
  tandem_mpi_fault(delay "delay:grad=1,mb=1,ms=3600000" 5 0 "0B1<1" 1
    "[r0/2] rank 0 waited 5 s for message '")
  tandem_mpi_fault(throw "throw:grad=0,mb=1" 600 0 "0F1>1" 1
    "injected fault (throw:mb=1,grad=0): the send of '")
  # Corrupted headers: the wire header announces the payload's bytes under another dtype or
  # shape; the receiver notices as it does in process.
  tandem_mpi_fault(corrupt_dtype "corrupt-dtype:grad=0,mb=0" 600 1 "1F0<0" 0
    "the activation 'h0_0' from stage 0 arrived with dtype Int")
  tandem_mpi_fault(corrupt_shape "corrupt-shape:grad=0,mb=1" 600 1 "1F1" 1 "")
  tandem_mpi_fault(corrupt_gradient_dtype "corrupt-dtype:grad=1,mb=0" 600 0 "0B0" 0
    "the gradient of '")
endif()
