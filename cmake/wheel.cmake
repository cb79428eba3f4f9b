# The wheel's layout (GENSCOPE_WHEEL, set by pyproject.toml for scikit-build-core), all in
# install component `python`, relative to the wheel's platlib (site-packages):
#
#   genscope/                    the package and _genscope.cpython-*.so (python/CMakeLists.txt)
#   genscope/_bin/genscope       the C++ CLI (no LibTorch: `genscope demo` runs genscope-demo
#                                from the PATH, tools/genscope/demo_exec.cpp); the `genscope`
#                                console script and `python -m genscope` exec it
#   genscope/share/genscope/comfyui   the ComfyUI node package, where `genscope comfyui
#                                install` looks beside its bin folder (comfyui_command.cpp)
#   genscope/_libs/              the shared libraries the module and the CLI link (hwy,
#                                sqlite3, re2, OpenBLAS, libgomp, cpp-httplib and what they
#                                pull in), found through RPATH $ORIGIN/...; glibc, libstdc++
#                                and libgcc_s are left to the system (every Debian has them)
#
# The RPATH is a DT_RPATH (--disable-new-dtags), not a DT_RUNPATH: the loader also searches a
# DT_RPATH for the dependencies of dependencies (cpp-httplib's libssl), so the copied libraries
# need no editing. GENSCOPE_WHEEL_BUNDLE_LIBS=OFF (scripts/setup, whose machine has the
# libraries) links the system's copies instead.
option(GENSCOPE_WHEEL_BUNDLE_LIBS "Copy the linked shared libraries into the wheel" ON)
if(NOT TARGET _genscope OR NOT TARGET genscope_cli)
  message(FATAL_ERROR "GENSCOPE_WHEEL needs the Python binding and the CLI "
                      "(GENSCOPE_BUILD_TOOLS=ON, pybind11 and the Python headers)")
endif()
set(genscope_pkg ${GENSCOPE_PYTHON_INSTALL_DIR}/genscope)

install(TARGETS genscope_cli RUNTIME DESTINATION ${genscope_pkg}/_bin COMPONENT python)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/integrations/comfyui/
  DESTINATION ${genscope_pkg}/share/genscope/comfyui COMPONENT python
  PATTERN tests EXCLUDE PATTERN __pycache__ EXCLUDE)

if(GENSCOPE_WHEEL_BUNDLE_LIBS)
  set_target_properties(_genscope PROPERTIES INSTALL_RPATH "$ORIGIN/_libs")
  set_target_properties(genscope_cli PROPERTIES INSTALL_RPATH "$ORIGIN/../_libs")
  foreach(target _genscope genscope_cli)
    target_link_options(${target} PRIVATE -Wl,--disable-new-dtags)
  endforeach()
  # Resolved from the built files (their dependencies are the installed ones'), then each
  # library's real file copied under the name the loader asks for (its DT_NEEDED soname).
  install(CODE "set(genscope_libs_dir \"${genscope_pkg}/_libs\")
    set(genscope_module \"$<TARGET_FILE:_genscope>\")
    set(genscope_cli \"$<TARGET_FILE:genscope_cli>\")" COMPONENT python)
  install(CODE [[
    if(NOT IS_ABSOLUTE "${genscope_libs_dir}")
      set(genscope_libs_dir "${CMAKE_INSTALL_PREFIX}/${genscope_libs_dir}")
    endif()
    set(genscope_libs_dir "$ENV{DESTDIR}${genscope_libs_dir}")
    file(GET_RUNTIME_DEPENDENCIES
      MODULES "${genscope_module}" EXECUTABLES "${genscope_cli}"
      RESOLVED_DEPENDENCIES_VAR genscope_deps UNRESOLVED_DEPENDENCIES_VAR genscope_missing
      PRE_EXCLUDE_REGEXES
        "^(ld-linux.*|libc|libm|libdl|libpthread|librt|libresolv|libutil)\\.so"
        "^(libstdc\\+\\+|libgcc_s)\\.so"
      POST_EXCLUDE_REGEXES "^/(usr/)?lib(64)?/ld-linux")
    if(genscope_missing)
      message(FATAL_ERROR "wheel: unresolved shared libraries: ${genscope_missing}")
    endif()
    file(MAKE_DIRECTORY "${genscope_libs_dir}")
    foreach(dep IN LISTS genscope_deps)
      get_filename_component(name "${dep}" NAME)
      file(REAL_PATH "${dep}" real)
      message(STATUS "Bundling: ${genscope_libs_dir}/${name} (${real})")
      file(COPY_FILE "${real}" "${genscope_libs_dir}/${name}")
      file(CHMOD "${genscope_libs_dir}/${name}" FILE_PERMISSIONS OWNER_READ OWNER_WRITE
           GROUP_READ WORLD_READ)
    endforeach()
  ]] COMPONENT python)
endif()
