# CUDA for tg. Included by the top-level CMakeLists.txt before the `tg` library exists.
#
# Sets, for the main library:
#   TG_DEVICE_SOURCES  the device implementation: the real .cu sources (as the objects of
#                      tg_cuda) when CUDA is built, else nothing (the registry
#                      src/ops/backend.c, compiled with TG_WITH_CUDA=0, then answers every
#                      CUDA request with a clean error);
#   TG_DEVICE_LIBS     CUDA::cudart CUDA::cublas, or nothing;
#   TG_HAVE_CUDA       ON when the main library has the real CUDA device.
# TG_CUDA=OFF: no CUDA device. ON: real CUDA, or a configure error. AUTO: real CUDA when nvcc and
# cuBLAS are found (and not under TG_SANITIZE: the sanitizers' shadow memory and the CUDA
# driver do not mix; the emulation build below is what the sanitizers check).
#
# And, when TG_BUILD_TESTS is on, whatever the above: tg_emu, a static library of the core
# plus the same .cu sources compiled as host C++ against src/ops/cuda/emu/ (a GPU-less
# emulation of the CUDA runtime and cuBLAS). tests/cuda/ runs the CUDA suite against it.

set(_tg_cuda_dir ${CMAKE_CURRENT_SOURCE_DIR}/src/ops/cuda)
file(GLOB TG_CUDA_SOURCES CONFIGURE_DEPENDS ${_tg_cuda_dir}/*.cu)
# What the CUDA sources include: tg's headers and src/ (ops/..., tensor/...).
set(_tg_cuda_includes ${CMAKE_CURRENT_SOURCE_DIR}/include ${CMAKE_CURRENT_SOURCE_DIR}/src)

# ---- decide ----
set(TG_HAVE_CUDA OFF)
if(TG_CUDA STREQUAL "ON")
  set(_tg_want_cuda ON)
elseif(TG_CUDA STREQUAL "AUTO")
  set(_tg_want_cuda OFF)
  if(TG_SANITIZE)
    message(STATUS "tg: TG_SANITIZE is on: CUDA device not built (TG_CUDA=ON forces it); "
                   "the emulated CUDA build is sanitized instead")
  else()
    include(CheckLanguage)
    check_language(CUDA)
    if(CMAKE_CUDA_COMPILER)
      find_package(CUDAToolkit QUIET)
      if(CUDAToolkit_FOUND AND TARGET CUDA::cublas AND TARGET CUDA::cudart)
        set(_tg_want_cuda ON)
      else()
        message(STATUS "tg: nvcc found but not cuBLAS: CUDA device not built")
      endif()
    else()
      message(STATUS "tg: nvcc not found: CUDA device not built")
    endif()
  endif()
elseif(TG_CUDA STREQUAL "OFF")
  set(_tg_want_cuda OFF)
else()
  message(FATAL_ERROR "TG_CUDA must be AUTO, ON or OFF (got '${TG_CUDA}')")
endif()

# ---- the main library's device ----
if(_tg_want_cuda)
  enable_language(CUDA)
  find_package(CUDAToolkit REQUIRED)
  if(NOT TARGET CUDA::cublas)
    message(FATAL_ERROR "TG_CUDA=ON but cuBLAS was not found with the CUDA toolkit")
  endif()
  add_library(tg_cuda OBJECT ${TG_CUDA_SOURCES})
  # sm_80 and sm_90 machine code, plus sm_90 PTX for newer GPUs to JIT.
  set_target_properties(tg_cuda PROPERTIES
    CUDA_ARCHITECTURES "80-real;90-real;90-virtual"
    CUDA_STANDARD 17 CUDA_STANDARD_REQUIRED ON
    POSITION_INDEPENDENT_CODE ON ${TG_HIDDEN_VISIBILITY})
  # Directory-wide options (the sanitizer flags) are host-compiler options nvcc rejects.
  set_property(TARGET tg_cuda PROPERTY COMPILE_OPTIONS "")
  target_include_directories(tg_cuda PRIVATE ${_tg_cuda_includes})
  target_link_libraries(tg_cuda PRIVATE CUDA::cudart CUDA::cublas)
  # Host code: warnings as for C. No exceptions and no guarded statics (nvcc's launch stubs
  # have some; they only hold constants) so that a C program links libtg.a without the
  # C++ runtime.
  set(_tg_host_flags -Wall,-Wextra,-fno-exceptions,-fno-threadsafe-statics)
  if(TG_WERROR)
    string(APPEND _tg_host_flags ",-Werror")
    target_compile_options(tg_cuda PRIVATE --Werror=all-warnings)
  endif()
  target_compile_options(tg_cuda PRIVATE -Xcompiler=${_tg_host_flags})
  set(TG_DEVICE_SOURCES $<TARGET_OBJECTS:tg_cuda>)
  set(TG_DEVICE_LIBS CUDA::cudart CUDA::cublas)
  set(TG_HAVE_CUDA ON)
  message(STATUS "tg: CUDA device built (nvcc ${CMAKE_CUDA_COMPILER_VERSION}, sm_80, sm_90 + PTX)")
else()
  set(TG_DEVICE_SOURCES "")
  set(TG_DEVICE_LIBS "")
endif()

# ---- the emulation build, for the tests ----
if(TG_BUILD_TESTS)
  # Each .cu compiled as C++ through a generated one-line wrapper: the .cu itself stays a
  # CUDA source for tg_cuda, and diagnostics point at the .cu.
  set(_tg_emu_wrappers "")
  foreach(cu ${TG_CUDA_SOURCES})
    get_filename_component(name ${cu} NAME_WE)
    set(wrapper ${CMAKE_CURRENT_BINARY_DIR}/tg_emu/${name}.cu.cpp)
    file(CONFIGURE OUTPUT ${wrapper} CONTENT "#include \"${cu}\"\n")
    list(APPEND _tg_emu_wrappers ${wrapper})
  endforeach()
  file(GLOB _tg_emu_runtime CONFIGURE_DEPENDS ${_tg_cuda_dir}/emu/*.cpp)
  # The emulation's own sources (the backend registry with TG_WITH_CUDA, the wrapped .cu
  # files, the emulated runtime), compiled once for both libraries below. Position-
  # independent (CMAKE_POSITION_INDEPENDENT_CODE) and of default visibility: the shared one
  # exports the emulated runtime (cudaMalloc, tg_emu_launch_begin, blockIdx, ...) for
  # extensions' kernels.
  add_library(tg_emu_objects OBJECT ${TG_BACKEND_REGISTRY} ${_tg_emu_wrappers} ${_tg_emu_runtime})
  target_compile_definitions(tg_emu_objects PRIVATE TG_CUDA_EMULATION TG_WITH_CUDA=1)
  target_include_directories(tg_emu_objects PRIVATE ${_tg_cuda_includes} ${BLIS_INCLUDE_DIR})
  target_compile_options(tg_emu_objects PRIVATE ${TG_WARNINGS})
  target_link_libraries(tg_emu_objects PRIVATE OpenMP::OpenMP_C)

  add_library(tg_emu STATIC $<TARGET_OBJECTS:tg_core> $<TARGET_OBJECTS:tg_emu_objects>)
  # The same as a shared library, libtg_emu.so: a program that loads extensions needs tg as a
  # shared library, and the JIT compiles an extension's .cu sources for the emulation when
  # the running tg is this one (tests/ext/test_jit_emu.c).
  add_library(tg_emu_shared SHARED $<TARGET_OBJECTS:tg_core> $<TARGET_OBJECTS:tg_emu_objects>)
  set_target_properties(tg_emu_shared PROPERTIES OUTPUT_NAME tg_emu)
  foreach(lib tg_emu tg_emu_shared)
    target_include_directories(${lib} PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/include)
    target_link_libraries(${lib} PUBLIC ${TG_LINK_DEPS})
  endforeach()
endif()
