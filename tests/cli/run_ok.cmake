# include(run_ok.cmake), then run_ok(COMMAND_LIST): runs the command and fails the script unless
# it exits with status 0; sets `shown` (the command as one line), `out` and `err` in the caller.
function(run_ok command)
  string(REPLACE ";" " " line "${command}")
  execute_process(COMMAND ${command} RESULT_VARIABLE rc OUTPUT_VARIABLE stdout
                  ERROR_VARIABLE stderr TIMEOUT 150)
  if(NOT rc STREQUAL "0")
    message(FATAL_ERROR "'${line}' exited with ${rc}\nstdout:\n${stdout}\nstderr:\n${stderr}")
  endif()
  set(shown "${line}" PARENT_SCOPE)
  set(out "${stdout}" PARENT_SCOPE)
  set(err "${stderr}" PARENT_SCOPE)
endfunction()

# peaks_within(OUTPUT BUDGET): fails the script unless OUTPUT (a result line) reports the peak of
# at least two devices (peak_mem_cpu:N=B) and every one is at most BUDGET bytes; sets `peaks`.
function(peaks_within output budget)
  string(REGEX MATCHALL "peak_mem_cpu:[0-9]+=[0-9]+" found "${output}")
  list(LENGTH found n)
  if(n LESS 2)
    message(FATAL_ERROR "no peak per device reported:\n${output}")
  endif()
  foreach(p ${found})
    string(REGEX REPLACE ".*=" "" bytes "${p}")
    if(bytes GREATER budget)
      message(FATAL_ERROR "${p} is above the budget of ${budget} bytes:\n${output}")
    endif()
  endforeach()
  set(peaks "${found}" PARENT_SCOPE)
endfunction()
