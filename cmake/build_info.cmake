# cmake -DSOURCE=dir -DOUT=file.cc -DVERSION=x.y.z -P build_info.cmake
# Writes OUT, the definition of tandem::build_info() (include/tandem/common/build_info.h): the
# version, the commit SOURCE is at (git rev-parse HEAD; "unknown" without git or a checkout)
# and whether tracked files have uncommitted changes. OUT is rewritten only when that changed,
# so a build compiles it again only after a commit. Run at every build (src/CMakeLists.txt).
set(commit "unknown")
set(modified false)
find_program(git_program git)
if(git_program AND EXISTS "${SOURCE}/.git")
  execute_process(COMMAND ${git_program} -C ${SOURCE} rev-parse HEAD OUTPUT_VARIABLE head
                  RESULT_VARIABLE rc OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(rc EQUAL 0 AND head MATCHES "^[0-9a-f]+$")
    set(commit "${head}")
    execute_process(COMMAND ${git_program} -C ${SOURCE} status --porcelain --untracked-files=no
                    OUTPUT_VARIABLE changes RESULT_VARIABLE rc ERROR_QUIET)
    if(rc EQUAL 0 AND NOT changes STREQUAL "")
      set(modified true)
    endif()
  endif()
endif()
file(WRITE "${OUT}.new" "// Generated at build time by cmake/build_info.cmake; not to be edited.
#include \"tandem/common/build_info.h\"

namespace tandem {
BuildInfo build_info() {
  return {\"${VERSION}\", \"${commit}\", ${modified}, R\"tandem_source(${SOURCE})tandem_source\"};
}
}  // namespace tandem
")
execute_process(COMMAND ${CMAKE_COMMAND} -E copy_if_different "${OUT}.new" "${OUT}")
file(REMOVE "${OUT}.new")
