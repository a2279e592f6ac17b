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
