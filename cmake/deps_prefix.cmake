# GENSCOPE_DEPS_PREFIX: a folder made by scripts/gpu-deps (Debian's packages, relocated), for
# machines that lack those packages, such as the lent GPU machines (docs/gpu.md). Searched
# before anything else: find_package() and find_path()/find_library() through
# CMAKE_PREFIX_PATH, pkg_check_modules() through the folder's own pkg-config, which reads only
# the folder's .pc files. Shared libraries found there are linked by full path, so CMake puts
# the folder in the build tree's RUNPATH and the programs run without LD_LIBRARY_PATH.
get_filename_component(GENSCOPE_DEPS_ROOT "${GENSCOPE_DEPS_PREFIX}" ABSOLUTE
                       BASE_DIR "${CMAKE_SOURCE_DIR}")
if(NOT EXISTS "${GENSCOPE_DEPS_ROOT}/MANIFEST" OR NOT EXISTS "${GENSCOPE_DEPS_ROOT}/usr")
  message(FATAL_ERROR "GENSCOPE_DEPS_PREFIX=${GENSCOPE_DEPS_PREFIX} is not a folder made by "
                      "scripts/gpu-deps (no MANIFEST or usr/ in ${GENSCOPE_DEPS_ROOT})")
endif()
list(PREPEND CMAKE_PREFIX_PATH "${GENSCOPE_DEPS_ROOT}/usr")
# Debian's OpenBLAS lives in its own folder (the alternatives link in lib/<arch> is not part of
# the package): FindBLAS looks there.
file(GLOB GENSCOPE_DEPS_OPENBLAS_DIRS "${GENSCOPE_DEPS_ROOT}/usr/lib/*/openblas-openmp")
list(PREPEND CMAKE_LIBRARY_PATH ${GENSCOPE_DEPS_OPENBLAS_DIRS})
if(EXISTS "${GENSCOPE_DEPS_ROOT}/usr/bin/pkg-config")
  set(PKG_CONFIG_EXECUTABLE "${GENSCOPE_DEPS_ROOT}/usr/bin/pkg-config" CACHE FILEPATH
      "pkg-config of GENSCOPE_DEPS_PREFIX")
endif()
message(STATUS "Dependencies from GENSCOPE_DEPS_PREFIX: ${GENSCOPE_DEPS_ROOT}")
