# cmake -DCMD="prog;args" -DREPORT=path -DDEVICES=N [-DMPI=1] -P report_json.cmake
# Runs CMD (a `tandem train` with --report REPORT on N CPU devices) and reads the JSON report
# back: one entry per device with its fractions and peak; one entry per memory, which for CPU
# devices is one per device with the same peak, none of them 0; the result line's peak_mem_
# fields are the memory entries' numbers. Every device was busy in the traced steps, and the
# simulator predicted a bubble from their times (so every device's timings reached the writer).
# The numerics object names the kernels the run computed with; weights is the result line's.
# MPI=1: one rank per device, and memory d names rank d.
file(REMOVE "${REPORT}")
string(REPLACE ";" " " shown "${CMD}")
execute_process(COMMAND ${CMD} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err
                TIMEOUT 150)
if(NOT rc STREQUAL "0")
  message(FATAL_ERROR "'${shown}' exited with ${rc}\nstdout:\n${out}\nstderr:\n${err}")
endif()
file(READ "${REPORT}" json)
foreach(key bubble_measured bubble_predicted flops_per_s traced_steps)
  string(JSON value ERROR_VARIABLE missing GET "${json}" ${key})
  if(missing)
    message(FATAL_ERROR "the report has no ${key}:\n${json}")
  endif()
endforeach()
# What the arithmetic depended on: the portable kernels (AVX2 families) that train sets up.
string(JSON aten ERROR_VARIABLE missing GET "${json}" numerics aten_kernels)
string(JSON blas ERROR_VARIABLE missing_blas GET "${json}" numerics openblas_kernels)
string(JSON torch ERROR_VARIABLE missing_torch GET "${json}" numerics libtorch)
if(missing OR missing_blas OR missing_torch OR NOT aten STREQUAL "AVX2"
   OR NOT blas STREQUAL "Haswell")
  message(FATAL_ERROR "the report's numerics should name ATen's AVX2 and OpenBLAS's Haswell "
                      "kernels and LibTorch's version:\n${json}")
endif()
# The trained weights' fingerprint: the result line's.
string(JSON weights ERROR_VARIABLE missing GET "${json}" weights)
if(missing OR NOT out MATCHES "result:[^\n]* weights=${weights}(\n|$)")
  message(FATAL_ERROR "the report's weights (${weights}) are not the result line's:\n${out}")
endif()
string(JSON predicted GET "${json}" bubble_predicted)
if(NOT predicted GREATER 0)
  message(FATAL_ERROR "no predicted bubble: the timings of some device are missing:\n${json}")
endif()
string(JSON n_devices LENGTH "${json}" devices)
string(JSON n_memory LENGTH "${json}" memory)
if(NOT n_devices EQUAL DEVICES OR NOT n_memory EQUAL DEVICES)
  message(FATAL_ERROR "want ${DEVICES} devices and ${DEVICES} memories, got ${n_devices} and "
                      "${n_memory}:\n${json}")
endif()
math(EXPR last "${DEVICES} - 1")
foreach(d RANGE ${last})
  string(JSON name GET "${json}" devices ${d} device)
  string(JSON device_peak GET "${json}" devices ${d} peak_bytes)
  string(JSON busy GET "${json}" devices ${d} busy)
  if(NOT busy GREATER 0)
    message(FATAL_ERROR "device ${d} (${name}) was never busy in the report:\n${json}")
  endif()
  string(JSON memory_name GET "${json}" memory ${d} memory)
  string(JSON memory_peak GET "${json}" memory ${d} peak_bytes)
  string(JSON shared LENGTH "${json}" memory ${d} devices)
  string(JSON owner GET "${json}" memory ${d} devices 0)
  if(NOT name STREQUAL memory_name OR NOT device_peak EQUAL memory_peak OR NOT shared EQUAL 1
     OR NOT owner EQUAL d OR NOT memory_peak GREATER 0)
    message(FATAL_ERROR "device ${d} (${name}, peak ${device_peak}) against memory ${d} "
                        "(${memory_name}, peak ${memory_peak}, ${shared} devices):\n${json}")
  endif()
  if(MPI)
    string(JSON rank GET "${json}" memory ${d} rank)
    if(NOT rank EQUAL d)
      message(FATAL_ERROR "memory ${d} should be rank ${d}'s, not rank ${rank}'s:\n${json}")
    endif()
  endif()
  if(NOT out MATCHES "result:[^\n]* peak_mem_${name}=${memory_peak}( |\n|$)")
    message(FATAL_ERROR "the result line has no peak_mem_${name}=${memory_peak}:\n${out}")
  endif()
endforeach()
message(STATUS "report: ${DEVICES} devices, ${DEVICES} memories, peaks match the result line")
