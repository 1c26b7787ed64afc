# RunPackageTest.cmake -- run with `cmake -D... -P RunPackageTest.cmake` (CTest test
# `package_consumer`). Installs the beehive build tree into a scratch prefix, then
# configures, builds and runs the consumer project (tests/package/) against that prefix
# with find_package(beehive), using the same generator, build type, compiler and flags.
#
# Inputs (-D):
#   BUILD_DIR            beehive build tree to install
#   PREFIX               scratch install prefix (wiped first)
#   CONSUMER_SOURCE_DIR  tests/package
#   CONSUMER_BINARY_DIR  scratch build tree for the consumer (wiped first)
#   GENERATOR, GENERATOR_PLATFORM, GENERATOR_TOOLSET, MAKE_PROGRAM
#   BUILD_TYPE           CMAKE_BUILD_TYPE / --config (may be empty)
#   CXX_COMPILER, CXX_FLAGS, EXE_LINKER_FLAGS, SHARED_LINKER_FLAGS
#                        forwarded so that e.g. sanitizer builds link (a static beehive
#                        built with -fsanitize needs the sanitizer runtime in the consumer)

cmake_minimum_required(VERSION 3.25)

foreach(_var IN ITEMS BUILD_DIR PREFIX CONSUMER_SOURCE_DIR CONSUMER_BINARY_DIR GENERATOR)
  if(NOT DEFINED ${_var} OR "${${_var}}" STREQUAL "")
    message(FATAL_ERROR "RunPackageTest.cmake: -D${_var}=... is required")
  endif()
endforeach()

function(run_step name)
  string(REPLACE ";" " " _pretty "${ARGN}")
  message(STATUS "package_consumer: ${name}: ${_pretty}")
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE _rc)
  if(NOT _rc EQUAL 0)
    message(FATAL_ERROR "package_consumer: ${name} failed (${_rc})")
  endif()
endfunction()

set(_config_args)
if(NOT "${BUILD_TYPE}" STREQUAL "")
  set(_config_args --config "${BUILD_TYPE}")
endif()

file(REMOVE_RECURSE "${PREFIX}" "${CONSUMER_BINARY_DIR}")

# 1. Install the beehive build tree.
run_step(install
  "${CMAKE_COMMAND}" --install "${BUILD_DIR}" --prefix "${PREFIX}" ${_config_args})

# 1b. The installed library is SQLite's plain user: no VFS shim of its own (the WAL
# batching one lost acknowledged transactions) and none of the tests' fault VFS
# (tests/support/, linked only by the tests).
file(GLOB_RECURSE _libs LIST_DIRECTORIES FALSE
  "${PREFIX}/*beehive*.a" "${PREFIX}/*beehive*.so*" "${PREFIX}/*beehive*.lib"
  "${PREFIX}/*beehive*.dll" "${PREFIX}/*beehive*.dylib")
if(NOT _libs)
  message(FATAL_ERROR "package_consumer: no installed beehive library under ${PREFIX}")
endif()
foreach(_lib IN LISTS _libs)
  file(STRINGS "${_lib}" _shims REGEX "beehive-fault|beehive-wal-batch|FaultVfs")
  if(_shims)
    message(FATAL_ERROR "package_consumer: ${_lib} contains a SQLite VFS shim (${_shims})")
  endif()
endforeach()

# 2. Configure the consumer against the prefix only.
set(_configure_args
  -S "${CONSUMER_SOURCE_DIR}"
  -B "${CONSUMER_BINARY_DIR}"
  -G "${GENERATOR}"
  "-DCMAKE_PREFIX_PATH=${PREFIX}"
  "-DCMAKE_FIND_PACKAGE_NO_PACKAGE_REGISTRY=ON"
  "-DCMAKE_CXX_FLAGS=${CXX_FLAGS}"
  "-DCMAKE_EXE_LINKER_FLAGS=${EXE_LINKER_FLAGS}"
  "-DCMAKE_SHARED_LINKER_FLAGS=${SHARED_LINKER_FLAGS}"
  "-DBEEHIVE_EXPECTED_PREFIX=${PREFIX}")
if(NOT "${GENERATOR_PLATFORM}" STREQUAL "")
  list(APPEND _configure_args -A "${GENERATOR_PLATFORM}")
endif()
if(NOT "${GENERATOR_TOOLSET}" STREQUAL "")
  list(APPEND _configure_args -T "${GENERATOR_TOOLSET}")
endif()
if(NOT "${MAKE_PROGRAM}" STREQUAL "")
  list(APPEND _configure_args "-DCMAKE_MAKE_PROGRAM=${MAKE_PROGRAM}")
endif()
if(NOT "${CXX_COMPILER}" STREQUAL "")
  list(APPEND _configure_args "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}")
endif()
if(NOT "${BUILD_TYPE}" STREQUAL "")
  list(APPEND _configure_args "-DCMAKE_BUILD_TYPE=${BUILD_TYPE}")
endif()
run_step(configure "${CMAKE_COMMAND}" ${_configure_args})

# 3. Build it.
run_step(build "${CMAKE_COMMAND}" --build "${CONSUMER_BINARY_DIR}" ${_config_args})

# 4. Run it (single- or multi-config layout).
file(GLOB_RECURSE _exe LIST_DIRECTORIES FALSE
  "${CONSUMER_BINARY_DIR}/beehive_consumer"
  "${CONSUMER_BINARY_DIR}/beehive_consumer.exe")
list(FILTER _exe EXCLUDE REGEX "/CMakeFiles/")
if(NOT _exe)
  message(FATAL_ERROR "package_consumer: beehive_consumer was not built in ${CONSUMER_BINARY_DIR}")
endif()
list(GET _exe 0 _exe)
set(_db_dir "${CONSUMER_BINARY_DIR}/data")
file(MAKE_DIRECTORY "${_db_dir}")
run_step(run "${_exe}" "${_db_dir}/consumer.db")

# 4b. The consumer's controller test, on the installed test kit.
file(GLOB_RECURSE _test_exe LIST_DIRECTORIES FALSE
  "${CONSUMER_BINARY_DIR}/beehive_consumer_tests" "${CONSUMER_BINARY_DIR}/beehive_consumer_tests.exe")
list(FILTER _test_exe EXCLUDE REGEX "/CMakeFiles/")
if(NOT _test_exe)
  message(FATAL_ERROR "package_consumer: beehive_consumer_tests was not built")
endif()
list(GET _test_exe 0 _test_exe)
run_step(run-tests "${_test_exe}")

# 5. The same consumer, built with nothing but pkg-config.
find_program(_pkg_config pkg-config)
if(_pkg_config)
  file(GLOB_RECURSE _pc LIST_DIRECTORIES FALSE "${PREFIX}/*/beehive.pc")
  if(NOT _pc)
    message(FATAL_ERROR "package_consumer: no beehive.pc under ${PREFIX}")
  endif()
  list(GET _pc 0 _pc)
  get_filename_component(_pc_dir "${_pc}" DIRECTORY)
  set(ENV{PKG_CONFIG_PATH} "${_pc_dir}")
  execute_process(COMMAND "${_pkg_config}" --cflags --libs beehive
    OUTPUT_VARIABLE _flags OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE _rc)
  if(NOT _rc EQUAL 0)
    message(FATAL_ERROR "package_consumer: pkg-config --cflags --libs beehive failed")
  endif()
  separate_arguments(_flags UNIX_COMMAND "${_flags}")
  separate_arguments(_extra UNIX_COMMAND "${CXX_FLAGS} ${EXE_LINKER_FLAGS}")
  set(_cxx "${CXX_COMPILER}")
  if("${_cxx}" STREQUAL "")
    set(_cxx c++)
  endif()
  set(_pc_exe "${CONSUMER_BINARY_DIR}/beehive_consumer_pc")
  run_step(pkg-config-build "${_cxx}" ${_extra} "${CONSUMER_SOURCE_DIR}/main.cpp" -o "${_pc_exe}"
    ${_flags})
  run_step(pkg-config-run "${_pc_exe}" "${_db_dir}/consumer-pc.db")
endif()

message(STATUS "package_consumer: OK")
