# nifticlib (Debian libnifti2-dev: NIfTI-1 and NIfTI-2 reading and writing) as the imported
# target tandem::nifticlib. Debian's own CMake package (/usr/share/cmake/NIFTI) names files the
# package does not install (/usr/lib/libznz.so.3.0.0, /usr/bin/nifti1_tool), so
# find_package(NIFTI) fails there; the header and the libraries are found directly instead.
# TANDEM_NIFTI_ROOT (include/, lib/) is searched first: scripts/gpu-deps.sh carries the headers
# and static libraries there to a machine without the package.
if(TARGET tandem::nifticlib)
  return()
endif()
find_package(ZLIB REQUIRED)
set(_tandem_nifti_hints)
if(TANDEM_NIFTI_ROOT)
  set(_tandem_nifti_hints HINTS "${TANDEM_NIFTI_ROOT}" NO_DEFAULT_PATH)
endif()
find_path(TANDEM_NIFTI_INCLUDE_DIR nifti2_io.h PATH_SUFFIXES include/nifti nifti
  ${_tandem_nifti_hints})
find_library(TANDEM_NIFTI2_LIBRARY NAMES nifti2 PATH_SUFFIXES lib ${_tandem_nifti_hints})
find_library(TANDEM_ZNZ_LIBRARY NAMES znz PATH_SUFFIXES lib ${_tandem_nifti_hints})
if(NOT TANDEM_NIFTI_INCLUDE_DIR OR NOT TANDEM_NIFTI2_LIBRARY OR NOT TANDEM_ZNZ_LIBRARY)
  message(FATAL_ERROR "nifticlib not found (header nifti2_io.h: ${TANDEM_NIFTI_INCLUDE_DIR}, "
    "libnifti2: ${TANDEM_NIFTI2_LIBRARY}, libznz: ${TANDEM_ZNZ_LIBRARY}): install Debian's "
    "libnifti2-dev (scripts/setup does)")
endif()
add_library(tandem::nifticlib INTERFACE IMPORTED GLOBAL)
set_target_properties(tandem::nifticlib PROPERTIES
  INTERFACE_INCLUDE_DIRECTORIES "${TANDEM_NIFTI_INCLUDE_DIR}"
  INTERFACE_LINK_LIBRARIES "${TANDEM_NIFTI2_LIBRARY};${TANDEM_ZNZ_LIBRARY};ZLIB::ZLIB;m")
