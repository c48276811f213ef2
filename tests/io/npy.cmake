# NumPy interop for .npy, both ways (tests/python/npy_interop.py): numpy writes files that
# npy_interop_tool reads, and reads the files the tool writes; compared exactly. Skipped
# visibly (exit code 77) when /usr/bin/python3 or its numpy is missing.
add_executable(npy_interop_tool ${CMAKE_CURRENT_SOURCE_DIR}/npy_interop_tool.c)
target_compile_options(npy_interop_tool PRIVATE ${TG_WARNINGS})
target_link_libraries(npy_interop_tool PRIVATE tg)
if(EXISTS /usr/bin/python3)
  add_test(NAME npy_interop
           COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/python/npy_interop.py
                   $<TARGET_FILE:npy_interop_tool> ${CMAKE_CURRENT_BINARY_DIR}/npy_interop)
else()
  add_test(NAME npy_interop
           COMMAND sh -c "echo 'SKIP npy_interop: /usr/bin/python3 not found'; exit 77")
endif()
set_tests_properties(npy_interop PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120)
