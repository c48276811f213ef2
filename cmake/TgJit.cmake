# The facts tg_extension_jit needs from configure time (src/ext/jit_config.h.in), written to
# the build tree and put on tg_core's include path. Included by the top-level CMakeLists.txt
# after TgCuda.cmake (it reads TG_HAVE_CUDA and tg_cuda's architectures), before the
# libraries link.
#
#   TG_JIT_SOURCE_INCLUDE_DIR  this source tree's include/: the headers a tg running from its
#                              build tree compiles extensions against (an installed tg uses
#                              <libdir>/../include instead, found at run time)
#   TG_JIT_SOURCE_SRC_DIR      this source tree's src/: the emulated CUDA runtime, for the .cu
#                              sources of extensions JIT-compiled by the tests' tg_emu
#   TG_JIT_HAVE_NVCC           1 when the library has the real CUDA device, with:
#   TG_JIT_NVCC                the nvcc tg was built with (used when $NVCC is not set)
#   TG_JIT_CUDA_INCLUDE_DIR    the CUDA toolkit's headers
#   TG_JIT_CUDA_LIBRARY_DIR    where libcudart.so is (an extension with .cu links it)
#   TG_JIT_NVCC_ARCH_FLAGS     -gencode flags for tg's own CUDA_ARCHITECTURES

set(TG_JIT_SOURCE_INCLUDE_DIR ${CMAKE_CURRENT_SOURCE_DIR}/include)
set(TG_JIT_SOURCE_SRC_DIR ${CMAKE_CURRENT_SOURCE_DIR}/src)
set(TG_JIT_HAVE_NVCC 0)
set(TG_JIT_NVCC "")
set(TG_JIT_CUDA_INCLUDE_DIR "")
set(TG_JIT_CUDA_LIBRARY_DIR "")
set(TG_JIT_NVCC_ARCH_FLAGS "")
if(TG_HAVE_CUDA)
  set(TG_JIT_HAVE_NVCC 1)
  set(TG_JIT_NVCC ${CMAKE_CUDA_COMPILER})
  list(GET CUDAToolkit_INCLUDE_DIRS 0 TG_JIT_CUDA_INCLUDE_DIR)
  set(TG_JIT_CUDA_LIBRARY_DIR ${CUDAToolkit_LIBRARY_DIR})
  # CMake's "80-real;90-virtual;86" as nvcc -gencode flags, one C string each.
  get_target_property(_tg_jit_archs tg_cuda CUDA_ARCHITECTURES)
  foreach(arch IN LISTS _tg_jit_archs)
    string(REGEX MATCH "^[0-9]+" _tg_sm "${arch}")
    if(NOT arch MATCHES "-virtual$")
      string(APPEND TG_JIT_NVCC_ARCH_FLAGS "\"-gencode=arch=compute_${_tg_sm},code=sm_${_tg_sm}\", ")
    endif()
    if(NOT arch MATCHES "-real$")
      string(APPEND TG_JIT_NVCC_ARCH_FLAGS
             "\"-gencode=arch=compute_${_tg_sm},code=compute_${_tg_sm}\", ")
    endif()
  endforeach()
endif()

set(_tg_jit_dir ${CMAKE_CURRENT_BINARY_DIR}/tg_jit)
configure_file(${CMAKE_CURRENT_SOURCE_DIR}/src/ext/jit_config.h.in ${_tg_jit_dir}/ext/jit_config.h
               @ONLY)
target_include_directories(tg_core PRIVATE ${_tg_jit_dir})
