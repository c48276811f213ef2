# The internal-assert tier (src/tensor/internal_assert.h): a death test, forced on in every
# build type. The report names file:line and the condition and says it is a bug in tg; the
# program must abort before "not reached".
add_executable(internal_assert_death ${CMAKE_CURRENT_LIST_DIR}/../internal_assert/death.c)
target_compile_options(internal_assert_death PRIVATE ${TG_WARNINGS})
if(NOT TG_INTERNAL_ASSERTS_ON) # on builds define it directory-wide already
  target_compile_definitions(internal_assert_death PRIVATE TG_INTERNAL_ASSERTS=1)
endif()
target_include_directories(internal_assert_death PRIVATE ${PROJECT_SOURCE_DIR}/src)
target_link_libraries(internal_assert_death PRIVATE tg)
# Through sh, which prints the exit status: ctest fails a test killed by a signal, whatever
# its output, and this one must die of SIGABRT (134 = 128 + 6).
find_program(TG_SH sh REQUIRED)
add_test(NAME internal_assert_death
         COMMAND ${TG_SH} -c "\"$0\" 2>&1; echo \"exit $?\"" $<TARGET_FILE:internal_assert_death>)
set_tests_properties(internal_assert_death PROPERTIES
  PASS_REGULAR_EXPRESSION
  "death\\.c:[0-9]+: internal assertion failed: argc == 0 && \"the death test's planted bug\": this is a bug in tg.*exit 134"
  FAIL_REGULAR_EXPRESSION "not reached")
tg_test_labels(internal_assert_death LABELS fast)
