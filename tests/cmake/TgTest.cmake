# How tg's tests are registered (tests/<folder>/CMakeLists.txt), and the labels they carry.
#
# Labels (`ctest -L <label>`):
#   cost, exactly one:  fast  the edit-compile-test loop (`ctest -L fast`: under a minute on
#                             2 cores, README "Tests"), slow  everything else;
#   needs, where apply: cuda  the CUDA suite (emulated or real), mpi  runs under mpiexec,
#                       python  runs a Python script;
#   and the groups dist (tg_dist), parity (the comparison with PyTorch) and gemm (suites
#   whose ops run tg's GEMM engines: scripts/test.sh repeats them under ASan on each other
#   BLIS kernel set the CPU executes; the rest runs no BLIS kernel or only the default one).
# Every test has one cost label: tg_check_test_labels() fails the configure otherwise.
#
# tg_add_test(NAME name LABELS fast|slow [label...]
#             [SOURCES file...] [LINK static|shared|emu_shared]
#             [COMMAND cmd...] [TIMEOUT s] [DEFINITIONS def...])
#   Without COMMAND: a Criterion executable `name` from SOURCES (default name.c), linked
#   against the test utilities over libtg.a (static, the default: sees tg's internals),
#   libtg.so (shared: what a program that loads extensions must link) or libtg_emu.so
#   (emu_shared: the CPU emulation of CUDA), run as `name --jobs 1` with TIMEOUT (default 300).
#   With COMMAND: a test that runs COMMAND (SOURCES, if given, still build executable name).
# tg_test_labels(test... LABELS label...)
#   adds labels to tests registered by add_test (scripts, programs under mpiexec, ...); a
#   test's cost label is given once, here or in tg_add_test.

set(_tg_cost_labels fast slow)

function(_tg_record_labels labels)
  set(cost "")
  foreach(label ${labels})
    if(label IN_LIST _tg_cost_labels)
      list(APPEND cost ${label})
    endif()
  endforeach()
  list(LENGTH cost n)
  if(n GREATER 1)
    message(FATAL_ERROR "tests ${ARGN}: one cost label, fast or slow (got '${labels}')")
  elseif(n EQUAL 1)
    set_property(GLOBAL APPEND PROPERTY TG_COST_LABELLED_TESTS ${ARGN})
  endif()
endfunction()

function(tg_test_labels)
  cmake_parse_arguments(PARSE_ARGV 0 ARG "" "" "LABELS")
  if(NOT ARG_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "tg_test_labels: no test named")
  endif()
  _tg_record_labels("${ARG_LABELS}" ${ARG_UNPARSED_ARGUMENTS})
  set_property(TEST ${ARG_UNPARSED_ARGUMENTS} APPEND PROPERTY LABELS ${ARG_LABELS})
  # Every test (each gets its cost label here, once) runs GEMMs on tg's fixed engine rules: a
  # calibration on first use (seconds, per CPU) would slow the suite, write to the user's
  # cache and make results depend on the machine's load. tests/ops/test_gemm_choice.c and the
  # guard-page sweep over every engine (test_blis_guard.c) set it themselves.
  foreach(label ${ARG_LABELS})
    if(label IN_LIST _tg_cost_labels)
      set_property(TEST ${ARG_UNPARSED_ARGUMENTS} APPEND PROPERTY ENVIRONMENT "TG_GEMM_ENGINE=builtin")
    endif()
    # A build tree that has not run its tests yet (a clean clone in CI) has no measured
    # times: ctest then starts the slow tests first, so that the last minutes are not one
    # long test on one core while the other idles.
    if(label STREQUAL "slow")
      set_property(TEST ${ARG_UNPARSED_ARGUMENTS} PROPERTY COST 10)
    endif()
  endforeach()
endfunction()

function(tg_add_test)
  cmake_parse_arguments(PARSE_ARGV 0 ARG "" "NAME;LINK;TIMEOUT" "SOURCES;LABELS;COMMAND;DEFINITIONS")
  if(NOT ARG_NAME)
    message(FATAL_ERROR "tg_add_test: NAME is required")
  endif()
  if(ARG_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "tg_add_test(${ARG_NAME}): unknown arguments ${ARG_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT ARG_COMMAND AND NOT ARG_SOURCES)
    set(ARG_SOURCES ${ARG_NAME}.c)
  endif()
  if(ARG_SOURCES)
    if(NOT ARG_LINK)
      set(ARG_LINK static)
    endif()
    if(ARG_LINK STREQUAL "static")
      set(util tg_testutil)
    elseif(ARG_LINK STREQUAL "shared")
      set(util tg_testutil_shared)
    elseif(ARG_LINK STREQUAL "emu_shared")
      set(util tg_testutil_emu_shared)
    else()
      message(FATAL_ERROR "tg_add_test(${ARG_NAME}): LINK must be static, shared or emu_shared")
    endif()
    add_executable(${ARG_NAME} ${ARG_SOURCES})
    target_compile_options(${ARG_NAME} PRIVATE ${TG_WARNINGS})
    target_link_libraries(${ARG_NAME} PRIVATE ${util})
    if(ARG_DEFINITIONS)
      target_compile_definitions(${ARG_NAME} PRIVATE ${ARG_DEFINITIONS})
    endif()
  endif()
  if(NOT ARG_COMMAND)
    set(ARG_COMMAND ${ARG_NAME} --jobs 1)
    if(NOT ARG_TIMEOUT)
      set(ARG_TIMEOUT 300)
    endif()
  endif()
  add_test(NAME ${ARG_NAME} COMMAND ${ARG_COMMAND})
  # With the real CUDA module built, a program of the build tree that holds libtg.a does not
  # find it by itself (libtg looks beside the program and in the install libdir): name it, so
  # that the CUDA parts of these tests run on a GPU machine. (libtg_emu.so loads its own.)
  # A test of the emulation (LINK emu_shared, or a program over tg_emu named *_emu) keeps the
  # emulated module its library names: TG_CUDA_MODULE would override it with the real one.
  if(TARGET tg_cuda AND NOT ARG_LINK STREQUAL "emu_shared" AND NOT ARG_NAME MATCHES "_emu$")
    set_property(TEST ${ARG_NAME} APPEND PROPERTY ENVIRONMENT "TG_CUDA_MODULE=$<TARGET_FILE:tg_cuda>")
  endif()
  if(ARG_TIMEOUT)
    set_tests_properties(${ARG_NAME} PROPERTIES TIMEOUT ${ARG_TIMEOUT})
  endif()
  tg_test_labels(${ARG_NAME} LABELS ${ARG_LABELS})
endfunction()

# Every test of the project (tests/, bench/, tools/, ...) has one cost label (through
# tg_add_test or tg_test_labels): a test without one would drop out of both `ctest -L fast`
# and `ctest -L slow` unseen. Called once, from the top-level CMakeLists.txt after the tests.
function(tg_check_test_labels)
  get_property(labelled GLOBAL PROPERTY TG_COST_LABELLED_TESTS)
  set(dirs ${CMAKE_CURRENT_SOURCE_DIR})
  set(unlabelled "")
  set(seen "")
  set(twice "")
  foreach(test ${labelled})
    if(test IN_LIST seen)
      list(APPEND twice ${test})
    endif()
    list(APPEND seen ${test})
  endforeach()
  if(twice)
    list(JOIN twice ", " twice)
    message(FATAL_ERROR "tests with two cost labels (fast and slow; tests/cmake/TgTest.cmake): "
                        "${twice}")
  endif()
  while(dirs)
    list(POP_FRONT dirs dir)
    get_property(tests DIRECTORY ${dir} PROPERTY TESTS)
    foreach(test ${tests})
      if(NOT test IN_LIST labelled)
        list(APPEND unlabelled ${test})
      endif()
    endforeach()
    get_property(subdirs DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
    list(APPEND dirs ${subdirs})
  endwhile()
  if(unlabelled)
    list(JOIN unlabelled ", " unlabelled)
    message(FATAL_ERROR "tests without a cost label (fast or slow; tests/cmake/TgTest.cmake): "
                        "${unlabelled}")
  endif()
endfunction()

# tg_add_remaining_tests(LABELS label...)
#   registers every test_*.c of the calling folder that no tg_add_test above made a target,
#   as a Criterion suite of that name with these labels: a new suite is a new file and
#   nothing else (docs/adding-a-fused-op.md); one that needs more is listed above the call.
function(tg_add_remaining_tests)
  cmake_parse_arguments(PARSE_ARGV 0 ARG "" "" "LABELS")
  file(GLOB sources CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/test_*.c)
  foreach(source ${sources})
    get_filename_component(name ${source} NAME_WE)
    if(NOT TARGET ${name})
      tg_add_test(NAME ${name} LABELS ${ARG_LABELS})
    endif()
  endforeach()
endfunction()
