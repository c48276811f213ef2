# tg_add_extension(<name> SOURCES <file>... [LIBRARIES <lib>...] [INCLUDE_DIRECTORIES <dir>...])
#
# Builds a tg extension, lib<name>.so, that tg_extension_load() (include/tg/extension.h) and
# `tg-op --load` take: a MODULE library of position-independent code, C11, hidden visibility
# (only the entry point TG_EXTENSION defines is exported), linked against tg's shared library
# (an extension must share the program's libtg.so). CUDA sources (.cu) are compiled when this
# tg has CUDA (TG_HAS_CUDA): the project must have enabled the CUDA language; the target then
# links CUDA::cudart and gets TG_EXTENSION_CUDA=1. The setup.py / CppExtension of tg.
#
# Installed beside tgConfig.cmake, which includes it; the tg build includes it too, for its
# own example and test extensions.
function(tg_add_extension name)
  cmake_parse_arguments(PARSE_ARGV 1 ARG "" "" "SOURCES;LIBRARIES;INCLUDE_DIRECTORIES")
  if(ARG_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "tg_add_extension(${name}): unknown arguments ${ARG_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT ARG_SOURCES)
    message(FATAL_ERROR "tg_add_extension(${name}): no SOURCES")
  endif()
  if(NOT name MATCHES "^[A-Za-z0-9_]+$")
    message(FATAL_ERROR "tg_add_extension(${name}): the name must be letters, digits and _")
  endif()
  if(TARGET tg_shared)
    set(tg_lib tg_shared) # inside tg's own build
  elseif(TARGET tg::tg_shared)
    set(tg_lib tg::tg_shared)
  else()
    message(FATAL_ERROR "tg_add_extension(${name}): call find_package(tg) first")
  endif()
  set(has_cuda_sources OFF)
  foreach(src IN LISTS ARG_SOURCES)
    if(src MATCHES "\\.cu$")
      set(has_cuda_sources ON)
    endif()
  endforeach()
  if(has_cuda_sources)
    if(NOT TG_HAS_CUDA)
      message(FATAL_ERROR "tg_add_extension(${name}): CUDA sources given, but this tg was built "
                          "without CUDA: leave the .cu files out")
    endif()
    get_property(languages GLOBAL PROPERTY ENABLED_LANGUAGES)
    if(NOT "CUDA" IN_LIST languages)
      message(FATAL_ERROR "tg_add_extension(${name}): CUDA sources given: call "
                          "enable_language(CUDA) (or list CUDA in project()) first")
    endif()
  endif()

  add_library(${name} MODULE ${ARG_SOURCES})
  set_target_properties(${name} PROPERTIES
    PREFIX "lib" POSITION_INDEPENDENT_CODE ON
    C_STANDARD 11 C_STANDARD_REQUIRED ON
    C_VISIBILITY_PRESET hidden CXX_VISIBILITY_PRESET hidden CUDA_VISIBILITY_PRESET hidden)
  target_include_directories(${name} PRIVATE ${ARG_INCLUDE_DIRECTORIES})
  target_link_libraries(${name} PRIVATE ${tg_lib} ${ARG_LIBRARIES})
  if(has_cuda_sources)
    find_package(CUDAToolkit REQUIRED)
    target_link_libraries(${name} PRIVATE CUDA::cudart)
    target_compile_definitions(${name} PRIVATE TG_EXTENSION_CUDA=1)
  endif()
  # A symbol the extension uses but neither it, tg nor its libraries define is a build error,
  # not a load-time surprise.
  target_link_options(${name} PRIVATE -Wl,--no-undefined)
endfunction()
