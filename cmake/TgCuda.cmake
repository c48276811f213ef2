# CUDA for tg. Included by the top-level CMakeLists.txt before the `tg` library exists.
#
# The CUDA device is a module of its own that libtg dlopen()s on the first use of a CUDA
# device (src/ops/device_module.h, src/ops/cuda_module.c): libtg never links cudart or cuBLAS.
# Sets, for the main library:
#   TG_DEVICE_LOADER_DEFS  for src/ops/cuda_module.c (the loader, in TG_BACKEND_REGISTRY,
#                          compiled per library): the module's file name and the directory
#                          baked in for it;
#   TG_HAVE_CUDA           ON when the real CUDA module, tg_cuda (libtg_cuda.so), is built.
# TG_CUDA=OFF: no CUDA module. ON: the real one, or a configure error. AUTO: the real one when
# nvcc and cuBLAS are found (and not under TG_SANITIZE: the sanitizers' shadow memory and the
# CUDA driver do not mix; the emulation build below is what the sanitizers check).
#
# And, when TG_BUILD_TESTS is on, whatever the above: tg_cuda_emu (libtg_cuda_emu.so), the same
# module built from the .cu sources compiled as host C++ against src/ops/cuda/emu/ (a GPU-less
# emulation of the CUDA runtime and cuBLAS), and tg_emu / tg_emu_shared, libtg whose loader
# finds that module by default. tests/cuda/ runs the CUDA suite against them.

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

# ---- the main library's device: libtg_cuda.so ----
if(_tg_want_cuda)
  enable_language(CUDA)
  find_package(CUDAToolkit REQUIRED)
  if(NOT TARGET CUDA::cublas)
    message(FATAL_ERROR "TG_CUDA=ON but cuBLAS was not found with the CUDA toolkit")
  endif()
  add_library(tg_cuda MODULE ${TG_CUDA_SOURCES})
  # By default sm_80 and sm_90 machine code, plus sm_90 PTX for newer GPUs to JIT.
  # scripts/test.sh builds one architecture where no GPU is present: nothing there runs the
  # module, and nvcc's passes per architecture were over a third of the Release build's time.
  set(TG_CUDA_ARCHITECTURES "80-real;90-real;90-virtual" CACHE STRING
      "CUDA_ARCHITECTURES of libtg_cuda.so (CMake's syntax)")
  set_target_properties(tg_cuda PROPERTIES
    CUDA_ARCHITECTURES "${TG_CUDA_ARCHITECTURES}"
    CUDA_STANDARD 17 CUDA_STANDARD_REQUIRED ON
    POSITION_INDEPENDENT_CODE ON ${TG_HIDDEN_VISIBILITY})
  # Directory-wide options (the sanitizer flags) are host-compiler options nvcc rejects.
  set_property(TARGET tg_cuda PROPERTY COMPILE_OPTIONS "")
  target_include_directories(tg_cuda PRIVATE ${_tg_cuda_includes})
  target_compile_definitions(tg_cuda PRIVATE TG_VERSION_STRING="${PROJECT_VERSION}")
  target_link_libraries(tg_cuda PRIVATE CUDA::cudart CUDA::cublas)
  # Exports the entry point only; what it uses of tg comes from libtg's import table, so
  # nothing may be left undefined (it must not link libtg: see src/ops/device_module.h).
  target_link_options(tg_cuda PRIVATE -Wl,--no-undefined
                      -Wl,--version-script=${_tg_cuda_dir}/module.map)
  set_property(TARGET tg_cuda APPEND PROPERTY LINK_DEPENDS ${_tg_cuda_dir}/module.map)
  # Host code: warnings as for C; no exceptions (nothing in tg throws).
  set(_tg_host_flags -Wall,-Wextra,-fno-exceptions,-fno-threadsafe-statics)
  if(TG_WERROR)
    string(APPEND _tg_host_flags ",-Werror")
    target_compile_options(tg_cuda PRIVATE --Werror=all-warnings)
  endif()
  target_compile_options(tg_cuda PRIVATE -Xcompiler=${_tg_host_flags})
  set(TG_HAVE_CUDA ON)
  set(TG_DEVICE_LOADER_DEFS TG_CUDA_MODULE_FILE="libtg_cuda.so"
                            TG_CUDA_MODULE_DIR="${CMAKE_INSTALL_FULL_LIBDIR}")
  message(STATUS "tg: CUDA device module built (nvcc ${CMAKE_CUDA_COMPILER_VERSION}, sm_80, sm_90 + PTX)")
else()
  # No module is built; one installed next to libtg or named by TG_CUDA_MODULE still loads.
  set(TG_DEVICE_LOADER_DEFS TG_CUDA_MODULE_FILE="libtg_cuda.so" TG_CUDA_MODULE_DIR="")
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
  # libtg_cuda_emu.so: the CUDA module over the emulated runtime. A shared library rather than
  # a MODULE so that the tests and JIT-compiled extensions can also link it: it exports the
  # emulated runtime (cudaMalloc, tg_emu_launch_begin, blockIdx, ...) and its controls
  # (emu/emu_control.h), all but the forwarders of the import table (emu/module.map). A program
  # that links it and then loads it through libtg gets the same instance (dlopen finds the
  # file already mapped).
  add_library(tg_cuda_emu SHARED ${_tg_emu_wrappers} ${_tg_emu_runtime})
  target_compile_definitions(tg_cuda_emu PRIVATE TG_CUDA_EMULATION
                                                 TG_VERSION_STRING="${PROJECT_VERSION}")
  target_include_directories(tg_cuda_emu PRIVATE ${_tg_cuda_includes} ${BLIS_INCLUDE_DIR})
  target_compile_options(tg_cuda_emu PRIVATE ${TG_WARNINGS})
  # The emulated cuBLAS computes with BLIS (its own copy when BLIS is linked statically,
  # hidden like libtg.so's).
  target_link_libraries(tg_cuda_emu PRIVATE ${TG_BLIS_LINK} OpenMP::OpenMP_C Threads::Threads)
  if(TG_BLIS_STATIC)
    get_filename_component(_tg_blis_archive "${BLIS_STATIC_LIBRARY}" NAME)
    target_link_options(tg_cuda_emu PRIVATE "-Wl,--exclude-libs,${_tg_blis_archive}")
  endif()
  target_link_options(tg_cuda_emu PRIVATE -Wl,--no-undefined
                      -Wl,--version-script=${_tg_cuda_dir}/emu/module.map)
  set_property(TARGET tg_cuda_emu APPEND PROPERTY LINK_DEPENDS ${_tg_cuda_dir}/emu/module.map)

  # libtg with the emulated module as its default (static and shared, libtg_emu.so: a program
  # that loads extensions needs tg as a shared library, and the JIT compiles an extension's
  # .cu sources for the emulation when the running tg's module is it, tests/ext/test_jit_emu.c).
  # They link the module too, so that the tests reach the emulation's controls.
  add_library(tg_emu STATIC $<TARGET_OBJECTS:tg_core> ${TG_BACKEND_REGISTRY})
  add_library(tg_emu_shared SHARED $<TARGET_OBJECTS:tg_core> ${TG_BACKEND_REGISTRY})
  set_target_properties(tg_emu_shared PROPERTIES OUTPUT_NAME tg_emu)
  foreach(lib tg_emu tg_emu_shared)
    target_compile_definitions(${lib} PRIVATE TG_CUDA_MODULE_FILE="libtg_cuda_emu.so"
                                              TG_CUDA_MODULE_DIR="$<TARGET_FILE_DIR:tg_cuda_emu>")
    target_include_directories(${lib} PRIVATE ${_tg_cuda_includes})
    target_compile_options(${lib} PRIVATE ${TG_WARNINGS})
    target_include_directories(${lib} PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/include)
    target_link_libraries(${lib} PUBLIC ${TG_LINK_DEPS} tg_cuda_emu)
  endforeach()
endif()
