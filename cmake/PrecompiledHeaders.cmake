# Precompiled headers: the standard library, LLVM's ADT and Support, GoogleTest and the IR's
# core are parsed once per flag set instead of once in every translation unit, about a third
# of a clean build's CPU time (docs/build.md has the figures).
#
# GCC takes a precompiled header only where it was made with the same code model (-fPIC
# against -fPIE) and where every macro it was made with is defined alike (_OPENMP from
# -fopenmp, __NO_MATH_ERRNO__ from -fno-math-errno); macros defined only where it is used are
# fine unless the headers read them. So each flag set has one maker, a small target of its
# own with only the flags that matter, and the targets with that flag set reuse its header.
# CMake passes -Winvalid-pch, and GRAPHC_WERROR turns a header GCC would pass over (a slow
# build, silently) into an error.
#
# Every file still includes what it uses: a build with -DGRAPHC_PCH=OFF checks it (scripts/fuzz
# builds the product code that way).
option(GRAPHC_PCH "Precompile the headers nearly every file includes" ON)

# The headers (C++ only: the CUDA files take none).
set(GRAPHC_PCH_HEADERS $<$<COMPILE_LANGUAGE:CXX>:${CMAKE_CURRENT_LIST_DIR}/PchCommon.h>)
set(GRAPHC_TEST_PCH_HEADERS $<$<COMPILE_LANGUAGE:CXX>:${CMAKE_CURRENT_LIST_DIR}/PchTests.h>)

# graphc_pch_maker(<name> [EXECUTABLE] HEADERS <header>... [LIBS <lib>...]):
# the target whose precompiled header the targets of one flag set reuse. EXECUTABLE makes it
# a program (compiled -fPIE, as test binaries are), linked to GoogleTest's main so it links.
function(graphc_pch_maker name)
  if(NOT GRAPHC_PCH)
    return()
  endif()
  cmake_parse_arguments(P "EXECUTABLE" "" "HEADERS;LIBS" ${ARGN})
  set(anchor ${PROJECT_SOURCE_DIR}/cmake/PchAnchor.cpp)
  if(P_EXECUTABLE)
    add_executable(${name} ${anchor})
  else()
    add_library(${name} OBJECT ${anchor})
  endif()
  # The IR's include path and LLVM's, without linking the IR (which reuses the header).
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR})
  target_link_libraries(${name} PRIVATE graphc_llvm ${P_LIBS})
  target_precompile_headers(${name} PRIVATE ${P_HEADERS})
endfunction()

# graphc_own_pch(<target>): a target whose flag set is its own precompiles for itself.
function(graphc_own_pch target)
  if(GRAPHC_PCH)
    target_precompile_headers(${target} PRIVATE ${GRAPHC_PCH_HEADERS})
  endif()
endfunction()

# graphc_use_pch(<maker> <target>...): the targets reuse the maker's precompiled header.
function(graphc_use_pch maker)
  if(GRAPHC_PCH)
    foreach(target ${ARGN})
      target_precompile_headers(${target} REUSE_FROM ${maker})
    endforeach()
  endif()
endfunction()
