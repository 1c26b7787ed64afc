# FindCAF.cmake -- locate the C++ Actor Framework 0.17 (Debian's libcaf-dev).
#
# CAF 0.17 ships neither a CMake package config nor a pkg-config file, so beehive
# carries this module (and installs it next to beehiveConfig.cmake).
#
# Result variables:
#   CAF_FOUND            TRUE when headers, libcaf_core and libcaf_io were found
#   CAF_VERSION          e.g. "0.17.6" (decoded from the CAF_VERSION macro, 1706)
#   CAF_INCLUDE_DIRS     directory that holds caf/all.hpp
#   CAF_LIBRARIES        libcaf_core and libcaf_io
#
# Cache variables (override them, or set CAF_ROOT, to pick another installation):
#   CAF_INCLUDE_DIR, CAF_CORE_LIBRARY, CAF_IO_LIBRARY
#
# Imported targets:
#   CAF::core            libcaf_core, with Threads::Threads in its link interface
#   CAF::io              libcaf_io, links CAF::core

include(FindPackageHandleStandardArgs)

find_path(CAF_INCLUDE_DIR
  NAMES caf/all.hpp
  DOC "Directory containing caf/all.hpp")
find_library(CAF_CORE_LIBRARY
  NAMES caf_core
  DOC "CAF core library (libcaf_core)")
find_library(CAF_IO_LIBRARY
  NAMES caf_io
  DOC "CAF I/O library (libcaf_io)")
mark_as_advanced(CAF_INCLUDE_DIR CAF_CORE_LIBRARY CAF_IO_LIBRARY)

# CAF_VERSION is {MAJOR}{MINOR:2}{PATCH:2}, e.g. 1706 = 0.17.6. CAF 0.18+ generates it
# into caf/detail/build_config.hpp; CAF 0.17 (Debian 12) defines it in caf/config.hpp.
unset(CAF_VERSION)
if(CAF_INCLUDE_DIR)
  foreach(_caf_header IN ITEMS caf/detail/build_config.hpp caf/config.hpp)
    if(EXISTS "${CAF_INCLUDE_DIR}/${_caf_header}")
      file(STRINGS "${CAF_INCLUDE_DIR}/${_caf_header}" _caf_version_line
           REGEX "^#[ \t]*define[ \t]+CAF_VERSION[ \t]+[0-9]+")
      if(_caf_version_line)
        string(REGEX REPLACE "^#[ \t]*define[ \t]+CAF_VERSION[ \t]+([0-9]+).*$" "\\1"
               _caf_version_number "${_caf_version_line}")
        math(EXPR _caf_major "${_caf_version_number} / 10000")
        math(EXPR _caf_minor "(${_caf_version_number} / 100) % 100")
        math(EXPR _caf_patch "${_caf_version_number} % 100")
        set(CAF_VERSION "${_caf_major}.${_caf_minor}.${_caf_patch}")
        break()
      endif()
    endif()
  endforeach()
  unset(_caf_header)
  unset(_caf_version_line)
  unset(_caf_version_number)
  unset(_caf_major)
  unset(_caf_minor)
  unset(_caf_patch)
endif()

find_package_handle_standard_args(CAF
  REQUIRED_VARS CAF_CORE_LIBRARY CAF_IO_LIBRARY CAF_INCLUDE_DIR
  VERSION_VAR CAF_VERSION)

if(CAF_FOUND)
  set(CAF_INCLUDE_DIRS "${CAF_INCLUDE_DIR}")
  set(CAF_LIBRARIES "${CAF_CORE_LIBRARY}" "${CAF_IO_LIBRARY}")

  if(NOT TARGET Threads::Threads)
    find_package(Threads REQUIRED)
  endif()

  if(NOT TARGET CAF::core)
    add_library(CAF::core UNKNOWN IMPORTED)
    set_target_properties(CAF::core PROPERTIES
      IMPORTED_LOCATION "${CAF_CORE_LIBRARY}"
      IMPORTED_LINK_INTERFACE_LANGUAGES "CXX"
      INTERFACE_INCLUDE_DIRECTORIES "${CAF_INCLUDE_DIR}"
      INTERFACE_LINK_LIBRARIES Threads::Threads)
  endif()

  if(NOT TARGET CAF::io)
    add_library(CAF::io UNKNOWN IMPORTED)
    set_target_properties(CAF::io PROPERTIES
      IMPORTED_LOCATION "${CAF_IO_LIBRARY}"
      IMPORTED_LINK_INTERFACE_LANGUAGES "CXX"
      INTERFACE_INCLUDE_DIRECTORIES "${CAF_INCLUDE_DIR}"
      INTERFACE_LINK_LIBRARIES CAF::core)
  endif()
endif()
