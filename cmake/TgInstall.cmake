# Installs headers, libraries, a CMake package (find_package(tg)) and tg.pc.
# Placeholder: headers and libraries only until packaging lands.
install(DIRECTORY include/tg DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS tg tg_shared ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
