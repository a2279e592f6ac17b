# minizip (Debian libminizip-dev: zlib's zip reader) as the imported target tandem::minizip.
# tandem reads zip archives with it only to check their structure before LibTorch's own reader
# sees them (src/checkpoint/zip_check.cc). TANDEM_MINIZIP_ROOT (include/, lib/) is searched
# first: scripts/gpu-deps.sh carries the headers and the static library there to a machine
# without the package.
if(TARGET tandem::minizip)
  return()
endif()
find_package(ZLIB REQUIRED)
set(_tandem_minizip_hints)
if(TANDEM_MINIZIP_ROOT)
  set(_tandem_minizip_hints HINTS "${TANDEM_MINIZIP_ROOT}" NO_DEFAULT_PATH)
endif()
find_path(TANDEM_MINIZIP_INCLUDE_DIR minizip/unzip.h PATH_SUFFIXES include
  ${_tandem_minizip_hints})
# The static library where there is one: nothing to carry at run time.
find_library(TANDEM_MINIZIP_LIBRARY NAMES libminizip.a minizip PATH_SUFFIXES lib
  ${_tandem_minizip_hints})
if(NOT TANDEM_MINIZIP_INCLUDE_DIR OR NOT TANDEM_MINIZIP_LIBRARY)
  message(FATAL_ERROR "minizip not found (header minizip/unzip.h: ${TANDEM_MINIZIP_INCLUDE_DIR}, "
    "library: ${TANDEM_MINIZIP_LIBRARY}): install Debian's libminizip-dev (scripts/setup does)")
endif()
# A library target of its own, not an interface list: the linker then always sees zlib after
# the static minizip that needs it.
add_library(tandem::minizip UNKNOWN IMPORTED GLOBAL)
set_target_properties(tandem::minizip PROPERTIES
  IMPORTED_LOCATION "${TANDEM_MINIZIP_LIBRARY}"
  INTERFACE_INCLUDE_DIRECTORIES "${TANDEM_MINIZIP_INCLUDE_DIR}"
  INTERFACE_LINK_LIBRARIES ZLIB::ZLIB)
