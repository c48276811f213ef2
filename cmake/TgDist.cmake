# tg_dist: data-parallel training over MPI (include/tg/dist.h, src/distributed/). Included by the
# top-level CMakeLists.txt after the tg libraries exist.
#
# TG_MPI=AUTO: with MPI when FindMPI finds its C binding; ON: MPI or a configure error; OFF:
# without. tg_dist is built either way: without MPI it holds the stub transport
# (src/distributed/comm_none.c) and every call answers TG_ERR_UNSUPPORTED.
# TG_NCCL (only where the CUDA device is built, TG_HAVE_CUDA, and with MPI, which carries
# NCCL's unique id): NCCL reduces CUDA tensors on tg's stream (src/distributed/nccl.c); without it
# CUDA tensors go through host memory.
#
# Targets:
#   tg_dist_shared  libtg_dist.so: links tg_shared (PUBLIC) and MPI (PRIVATE); installed as
#                   tg::tg_dist.
#   tg_dist         libtg_dist.a for tg's own tests: links the static tg, so tg_dist's host
#                   allocations and tg's share one fault injector (src/tensor/host_memory.h).
#   tg_dist_emu     libtg_dist_emu.a on the emulated CUDA build (the static tg_emu, like the CUDA
#                   suite), for the tests of the host-staging path of CUDA tensors; only with
#                   TG_BUILD_TESTS. Static so that those tests reach comm.h, as the others do.
#   tg_dist_nompi   libtg_dist_nompi.a: the same sources with the stub transport, where tg_dist
#                   has MPI and TG_BUILD_TESTS is on, so that the suite checks the build
#                   without MPI too (test_dist_unsupported).
# Sets TG_HAVE_MPI and TG_HAVE_NCCL.

set(TG_MPI "AUTO" CACHE STRING "Build tg_dist with MPI: AUTO (when found), ON, OFF")
set_property(CACHE TG_MPI PROPERTY STRINGS AUTO ON OFF)
set(TG_NCCL "AUTO" CACHE STRING "Reduce CUDA tensors with NCCL: AUTO (when found), ON, OFF")
set_property(CACHE TG_NCCL PROPERTY STRINGS AUTO ON OFF)

set(TG_HAVE_MPI OFF)
if(TG_MPI STREQUAL "ON" OR TG_MPI STREQUAL "AUTO")
  if(TG_MPI STREQUAL "ON")
    find_package(MPI REQUIRED COMPONENTS C)
  else()
    find_package(MPI QUIET COMPONENTS C)
  endif()
  if(MPI_C_FOUND)
    set(TG_HAVE_MPI ON)
    message(STATUS "tg: tg_dist built with MPI ${MPI_C_VERSION} (${MPIEXEC_EXECUTABLE})")
  else()
    message(STATUS "tg: MPI not found: tg_dist answers TG_ERR_UNSUPPORTED (apt-get install libopenmpi-dev)")
  endif()
elseif(NOT TG_MPI STREQUAL "OFF")
  message(FATAL_ERROR "TG_MPI must be AUTO, ON or OFF (got '${TG_MPI}')")
endif()

set(TG_HAVE_NCCL OFF)
if(NOT TG_NCCL MATCHES "^(AUTO|ON|OFF)$")
  message(FATAL_ERROR "TG_NCCL must be AUTO, ON or OFF (got '${TG_NCCL}')")
endif()
if(NOT TG_NCCL STREQUAL "OFF" AND TG_HAVE_CUDA AND TG_HAVE_MPI)
  find_path(TG_NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
  find_library(TG_NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR} ${CUDAToolkit_LIBRARY_ROOT}/lib)
  mark_as_advanced(TG_NCCL_INCLUDE_DIR TG_NCCL_LIBRARY)
  if(TG_NCCL_INCLUDE_DIR AND TG_NCCL_LIBRARY)
    set(TG_HAVE_NCCL ON)
    message(STATUS "tg: tg_dist reduces CUDA tensors with NCCL (${TG_NCCL_LIBRARY})")
  endif()
endif()
if(TG_NCCL STREQUAL "ON" AND NOT TG_HAVE_NCCL)
  message(FATAL_ERROR "TG_NCCL=ON needs the CUDA device (TG_HAVE_CUDA), MPI and NCCL "
                      "(nccl.h, libnccl) with the CUDA toolkit")
endif()

# The sources: every src/distributed/*.c but the two transports and nccl.c, which each library adds
# as it is built.
file(GLOB TG_DIST_SOURCES CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/src/distributed/*.c)
set(_tg_dist_dir ${CMAKE_CURRENT_SOURCE_DIR}/src/distributed)
list(REMOVE_ITEM TG_DIST_SOURCES ${_tg_dist_dir}/comm_none.c ${_tg_dist_dir}/comm_mpi.c
                                 ${_tg_dist_dir}/nccl.c)

# One tg_dist library on top of the tg library `base`; with MPI where `mpi` is true, NCCL
# where `nccl` is.
function(_tg_dist_library name type base mpi nccl)
  set(sources ${TG_DIST_SOURCES})
  if(mpi)
    list(APPEND sources ${_tg_dist_dir}/comm_mpi.c)
  else()
    list(APPEND sources ${_tg_dist_dir}/comm_none.c)
  endif()
  if(nccl)
    list(APPEND sources ${_tg_dist_dir}/nccl.c)
  endif()
  if(type STREQUAL "SHARED")
    # libtg.so does not export tg's internal allocator (tg__host_*): a shared tg_dist holds
    # its own copy of it (hidden), with a fault injector of its own.
    # The same for the argument checks' failure half (tg__fail, src/tensor/check_fail.c).
    list(APPEND sources ${CMAKE_CURRENT_SOURCE_DIR}/src/tensor/host_memory.c
                        ${CMAKE_CURRENT_SOURCE_DIR}/src/tensor/check_fail.c)
  endif()
  add_library(${name} ${type} ${sources})
  target_include_directories(${name} PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/src)
  target_compile_options(${name} PRIVATE ${TG_WARNINGS})
  target_link_libraries(${name} PUBLIC ${base} PRIVATE Threads::Threads)
  target_compile_definitions(${name} PRIVATE TG_WITH_MPI=$<BOOL:${mpi}>
                                             TG_WITH_NCCL=$<BOOL:${nccl}>)
  set_target_properties(${name} PROPERTIES ${TG_HIDDEN_VISIBILITY})
  if(mpi)
    target_link_libraries(${name} PRIVATE MPI::MPI_C)
  endif()
  if(nccl)
    target_include_directories(${name} PRIVATE ${TG_NCCL_INCLUDE_DIR} ${CUDAToolkit_INCLUDE_DIRS})
    target_link_libraries(${name} PRIVATE ${TG_NCCL_LIBRARY} CUDA::cudart)
  endif()
  if(type STREQUAL "SHARED")
    target_link_options(${name} PRIVATE -Wl,--no-undefined)
  endif()
endfunction()

_tg_dist_library(tg_dist_shared SHARED tg_shared ${TG_HAVE_MPI} ${TG_HAVE_NCCL})
set_target_properties(tg_dist_shared PROPERTIES OUTPUT_NAME tg_dist VERSION ${PROJECT_VERSION}
                                                SOVERSION 0 EXPORT_NAME tg_dist)
_tg_dist_library(tg_dist STATIC tg ${TG_HAVE_MPI} ${TG_HAVE_NCCL})
if(TG_BUILD_TESTS)
  # The emulation has no NCCL: CUDA tensors take the host copy there.
  _tg_dist_library(tg_dist_emu STATIC tg_emu ${TG_HAVE_MPI} OFF)
  if(TG_HAVE_MPI)
    _tg_dist_library(tg_dist_nompi STATIC tg OFF OFF)
  endif()
endif()
