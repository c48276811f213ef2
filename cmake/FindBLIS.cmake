# Finds BLIS as Debian's libblis-dev ships it: blis.h under the multiarch include directory,
# libblis.so selected through update-alternatives, and no pkg-config file.
# Sets BLIS_FOUND, BLIS_INCLUDE_DIR, BLIS_LIBRARY, and BLIS_STATIC_LIBRARY (libblis.a, the
# same build's static archive, position-independent on Debian) when it is there.
set(_tg_blis_multiarch "${CMAKE_LIBRARY_ARCHITECTURE}")
find_path(BLIS_INCLUDE_DIR blis.h
  PATHS /usr/include/${_tg_blis_multiarch} /usr/include/${_tg_blis_multiarch}/blis-openmp
        /usr/local/include
  PATH_SUFFIXES blis)
find_library(BLIS_LIBRARY NAMES blis
  PATHS /usr/lib/${_tg_blis_multiarch} /usr/lib/${_tg_blis_multiarch}/blis-openmp)
get_filename_component(_tg_blis_dir "${BLIS_LIBRARY}" DIRECTORY)
find_library(BLIS_STATIC_LIBRARY NAMES libblis.a HINTS ${_tg_blis_dir} NO_DEFAULT_PATH)
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(BLIS REQUIRED_VARS BLIS_LIBRARY BLIS_INCLUDE_DIR)
mark_as_advanced(BLIS_INCLUDE_DIR BLIS_LIBRARY BLIS_STATIC_LIBRARY)
