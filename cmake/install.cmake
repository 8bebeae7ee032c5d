# Installing the libraries as they ship (CMakeLists.txt: bw_library): headers, the core and one library per
# component, shared and static, a pkg-config file each and a CMake package with components:
#   find_package(breakwater 0.1 REQUIRED COMPONENTS redis curl)
#   target_link_libraries(app PRIVATE breakwater::breakwater breakwater::redis breakwater::curl)
# (breakwater::breakwater_static and breakwater::<component>_static for static linking.)
# The core's .pc file and targets never carry a component's flags.

install(DIRECTORY include/breakwater DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
set(bw_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/breakwater)
# The .pc files locate the prefix relative to themselves (BW_PC_RELOCATABLE), so that an installation moved
# anywhere (cmake --install --prefix, a copied tree) still works; a distribution's packages name it (OFF: the
# system's directories then read as such, and pkg-config leaves them out of the flags).
option(BW_PC_RELOCATABLE "pkg-config files find their prefix relative to themselves" ON)
if(BW_PC_RELOCATABLE)
  file(RELATIVE_PATH BW_PC_PREFIX "${CMAKE_INSTALL_FULL_LIBDIR}/pkgconfig" "${CMAKE_INSTALL_PREFIX}")
  set(BW_PC_PREFIX "\${pcfiledir}/${BW_PC_PREFIX}")
else()
  set(BW_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
endif()

set(bw_core_targets "")
foreach(t breakwater breakwater_static)
  if(TARGET ${t})
    list(APPEND bw_core_targets ${t})
  endif()
endforeach()
install(TARGETS ${bw_core_targets} EXPORT breakwaterTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(EXPORT breakwaterTargets NAMESPACE breakwater:: DESTINATION ${bw_cmake_dir})

set(BW_PC_NAME breakwater)
set(BW_PC_DESCRIPTION "Circuit breakers and resilience patterns for C and C++")
set(BW_PC_REQUIRES "")
set(BW_PC_LIBS "-lbreakwater")
set(BW_PC_LIBS_PRIVATE "-lpthread")
configure_file(cmake/breakwater.pc.in ${PROJECT_BINARY_DIR}/pkgconfig/breakwater.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/pkgconfig/breakwater.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

foreach(c ${BW_COMPONENTS})
  set(targets "")
  foreach(t breakwater-${c} breakwater-${c}_static)
    if(TARGET ${t})
      list(APPEND targets ${t})
    endif()
  endforeach()
  install(TARGETS ${targets} EXPORT breakwater-${c}Targets
    LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
    ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
  install(EXPORT breakwater-${c}Targets NAMESPACE breakwater:: DESTINATION ${bw_cmake_dir})
  # Its dependencies as -l flags in Libs.private (only a static link needs them; Requires.private would make
  # pkg-config demand the dependency's own -dev package even for a shared link).
  get_property(libs GLOBAL PROPERTY BW_COMP_LIBS_${c})
  set(priv "")
  foreach(l ${libs})
    get_filename_component(n ${l} NAME_WE)
    string(REGEX REPLACE "^lib" "" n "${n}")
    if(NOT l MATCHES "^-")
      set(l "-l${n}")
    endif()
    string(APPEND priv " ${l}")
  endforeach()
  string(REPLACE "-" "_" sym "bw__component_${c}")
  set(BW_PC_NAME breakwater-${c})
  set(BW_PC_DESCRIPTION "breakwater's ${c} component")
  set(BW_PC_REQUIRES "breakwater = ${PROJECT_VERSION}")
  # -u: the program references the component's descriptor, so that a static link takes it from the archive
  # (base/component.h); a shared link need not keep the library (the core loads a store's by its soname).
  set(BW_PC_LIBS "-Wl,-u,${sym} -lbreakwater-${c}")
  string(STRIP "${priv}" BW_PC_LIBS_PRIVATE)
  configure_file(cmake/breakwater.pc.in ${PROJECT_BINARY_DIR}/pkgconfig/breakwater-${c}.pc @ONLY)
  install(FILES ${PROJECT_BINARY_DIR}/pkgconfig/breakwater-${c}.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
endforeach()

include(CMakePackageConfigHelpers)
configure_file(cmake/breakwaterConfig.cmake.in ${PROJECT_BINARY_DIR}/breakwaterConfig.cmake @ONLY)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/breakwaterConfigVersion.cmake COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/breakwaterConfig.cmake ${PROJECT_BINARY_DIR}/breakwaterConfigVersion.cmake
  DESTINATION ${bw_cmake_dir})
