# Installs tg: the headers, the static and shared libraries, a relocatable CMake package
# (find_package(tg) gives tg::tg, static, tg::tg_shared and tg::tg_dist) and tg.pc for pkg-config.
# Included at the end of the top-level CMakeLists.txt, after the targets and TgCuda.
include(CMakePackageConfigHelpers)

set(TG_INSTALL_CMAKEDIR "${CMAKE_INSTALL_LIBDIR}/cmake/tg" CACHE STRING
    "Where tgConfig.cmake is installed, relative to the prefix")
mark_as_advanced(TG_INSTALL_CMAKEDIR)

# The targets link BLIS and libm by absolute path (right for the build tree, wrong on another
# machine). The exported interface names them instead: BLIS::BLIS, which tgConfig.cmake
# defines after finding BLIS again, and plain m and cjson.
foreach(lib tg tg_shared)
  get_target_property(_tg_iface ${lib} INTERFACE_LINK_LIBRARIES)
  set(_tg_new "")
  foreach(item IN LISTS _tg_iface)
    if(item STREQUAL "${TG_BLIS_LINK}")
      list(APPEND _tg_new "$<BUILD_INTERFACE:${item}>" "$<INSTALL_INTERFACE:BLIS::BLIS>")
    elseif(TG_LIBM AND item STREQUAL "${TG_LIBM}")
      list(APPEND _tg_new "$<BUILD_INTERFACE:${item}>" "$<INSTALL_INTERFACE:m>")
    elseif(item STREQUAL "${TG_CJSON_LIBRARY}" AND lib STREQUAL "tg")
      list(APPEND _tg_new "$<BUILD_INTERFACE:${item}>" "$<INSTALL_INTERFACE:cjson>")
    elseif(item STREQUAL "${TG_CJSON_LIBRARY}") # libtg.so needs libcjson.so itself, not its users
      list(APPEND _tg_new "$<BUILD_INTERFACE:${item}>")
    else()
      list(APPEND _tg_new "${item}")
    endif()
  endforeach()
  set_target_properties(${lib} PROPERTIES INTERFACE_LINK_LIBRARIES "${_tg_new}")
endforeach()
set_target_properties(tg_shared PROPERTIES EXPORT_NAME tg_shared)

install(DIRECTORY include/tg DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS tg tg_shared EXPORT tgTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# libtg_dist.so, tg::tg_dist (its MPI is private: users link tg_dist, not MPI). The static
# tg_dist is for tg's tests only.
install(TARGETS tg_dist_shared EXPORT tgTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(EXPORT tgTargets NAMESPACE tg:: DESTINATION ${TG_INSTALL_CMAKEDIR})

# The CUDA device module, libtg_cuda.so, beside libtg: libtg loads it on the first use of a
# CUDA device (src/ops/cuda_module.c looks next to libtg.so, in its tg/ subfolder, then in this
# libdir as baked in at configure time). Nothing links it, so it is in no export set.
if(TARGET tg_cuda)
  install(TARGETS tg_cuda LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
endif()

# tgConfig.cmake finds CUDAToolkit again when tg has CUDA, for extensions' .cu sources
# (tg_add_extension links CUDA::cudart); tg itself links no CUDA library.
set(TG_CONFIG_NEEDS_CUDA ${TG_HAVE_CUDA})
configure_package_config_file(cmake/tgConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/tgConfig.cmake INSTALL_DESTINATION ${TG_INSTALL_CMAKEDIR})
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/tgConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/tgConfig.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/tgConfigVersion.cmake
              ${CMAKE_CURRENT_SOURCE_DIR}/cmake/FindBLIS.cmake
              ${CMAKE_CURRENT_SOURCE_DIR}/cmake/TgExtension.cmake
        DESTINATION ${TG_INSTALL_CMAKEDIR})

# ---- tg.pc: relocatable (the prefix is found from the .pc file's own directory) ----
set(TG_PC_DIR "${CMAKE_INSTALL_LIBDIR}/pkgconfig")
if(IS_ABSOLUTE "${TG_PC_DIR}")
  set(TG_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
else()
  file(RELATIVE_PATH _tg_up "/prefix/${TG_PC_DIR}" "/prefix")
  string(REGEX REPLACE "/$" "" _tg_up "${_tg_up}")
  set(TG_PC_PREFIX "\${pcfiledir}/${_tg_up}")
endif()
foreach(dir LIBDIR INCLUDEDIR)
  if(IS_ABSOLUTE "${CMAKE_INSTALL_${dir}}")
    set(TG_PC_${dir} "${CMAKE_INSTALL_${dir}}")
  else()
    set(TG_PC_${dir} "\${prefix}/${CMAKE_INSTALL_${dir}}")
  endif()
endforeach()

# What a static link needs beyond -ltg: BLIS, libcjson, the OpenMP runtime, threads, libm (not
# CUDA: libtg.a loads the CUDA module at run time).
set(TG_PC_LIBS_PRIVATE "")
function(tg_pc_add_library path)
  get_filename_component(dir "${path}" DIRECTORY)
  get_filename_component(name "${path}" NAME_WE)
  string(REGEX REPLACE "^lib" "" name "${name}")
  if(dir AND NOT dir IN_LIST CMAKE_C_IMPLICIT_LINK_DIRECTORIES)
    set(TG_PC_LIBS_PRIVATE "${TG_PC_LIBS_PRIVATE} -L${dir}")
  endif()
  set(TG_PC_LIBS_PRIVATE "${TG_PC_LIBS_PRIVATE} -l${name}" PARENT_SCOPE)
endfunction()
if(TG_HAVE_XSMM)
  set(TG_PC_LIBS_PRIVATE "${TG_XSMM_LIBRARY}") # before BLIS, whose BLAS calls it makes
endif()
if(TG_BLIS_STATIC)
  # libtg.a needs the same BLIS build's archive
  set(TG_PC_LIBS_PRIVATE "${TG_PC_LIBS_PRIVATE} ${BLIS_STATIC_LIBRARY}")
else()
  tg_pc_add_library("${BLIS_LIBRARY}")
endif()
if(TG_HAVE_XSMM)
  set(TG_PC_LIBS_PRIVATE "${TG_PC_LIBS_PRIVATE} -ldl -lrt")
endif()
tg_pc_add_library("${TG_CJSON_LIBRARY}")
foreach(name IN LISTS OpenMP_C_LIB_NAMES)
  tg_pc_add_library("${OpenMP_${name}_LIBRARY}")
endforeach()
if(CMAKE_THREAD_LIBS_INIT AND NOT TG_PC_LIBS_PRIVATE MATCHES "-lpthread")
  set(TG_PC_LIBS_PRIVATE "${TG_PC_LIBS_PRIVATE} ${CMAKE_THREAD_LIBS_INIT}")
endif()
if(TG_LIBM)
  set(TG_PC_LIBS_PRIVATE "${TG_PC_LIBS_PRIVATE} -lm")
endif()
string(STRIP "${TG_PC_LIBS_PRIVATE}" TG_PC_LIBS_PRIVATE)
configure_file(cmake/tg.pc.in ${CMAKE_CURRENT_BINARY_DIR}/tg.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/tg.pc DESTINATION ${TG_PC_DIR})
