# safetensors interop with Python (tests/python/safetensors_interop.py): files written by
# Python read by tg and the other way, compared exactly, through a small C tool. Skips (77)
# visibly when /usr/bin/python3 or its numpy is missing.
add_executable(safetensors_interop_tool ${CMAKE_CURRENT_SOURCE_DIR}/safetensors_interop_tool.c)
target_compile_options(safetensors_interop_tool PRIVATE ${TG_WARNINGS})
target_link_libraries(safetensors_interop_tool PRIVATE tg)
if(EXISTS /usr/bin/python3)
  add_test(NAME safetensors_interop
           COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/python/safetensors_interop.py
                   $<TARGET_FILE:safetensors_interop_tool>)
else()
  add_test(NAME safetensors_interop
           COMMAND sh -c "echo 'SKIP: /usr/bin/python3 is missing (safetensors interop)'; exit 77")
endif()
set_tests_properties(safetensors_interop PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120)
