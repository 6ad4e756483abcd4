# Third-party dependencies. Every one of them comes from Debian packages that
# scripts/install-deps installs (oneDNN may come from GRAPHC_DNNL_ROOT instead); CUDA is optional at
# configure time and only ever loaded at run time (dlopen), so graphc and the CPU path start on
# machines without CUDA libraries.

# LLVM ADT and Support: static archives only, so nothing LLVM is needed at run time.
set(GRAPHC_LLVM_ROOT /usr/lib/llvm-14 CACHE PATH "LLVM 14 installation")
add_library(graphc_llvm INTERFACE)
target_include_directories(graphc_llvm SYSTEM INTERFACE ${GRAPHC_LLVM_ROOT}/include)
target_link_libraries(graphc_llvm INTERFACE
  ${GRAPHC_LLVM_ROOT}/lib/libLLVMSupport.a ${GRAPHC_LLVM_ROOT}/lib/libLLVMDemangle.a
  tinfo z dl rt m pthread)

# Protobuf must come before ONNX (ONNX's config looks it up).
find_package(Protobuf 3.21 REQUIRED)
find_package(ONNX 1.12 REQUIRED CONFIG)

# oneDNN: Debian's 2.6 unless GRAPHC_DNNL_ROOT names another prefix (scripts/fetch-onednn3 unpacks
# oneDNN 3.2 and prints its prefix); kernels/cpu/DnnlCompat.h bridges the two APIs. The binaries
# find that prefix's library through the RPATH CMake gives them in the build tree (nothing here is
# installed).
set(GRAPHC_DNNL_ROOT "" CACHE PATH "A oneDNN prefix to build against instead of Debian's")
if(GRAPHC_DNNL_ROOT)
  # No version in the call: the config of 3.x refuses a request for 2.6 (another major version).
  find_package(dnnl REQUIRED CONFIG PATHS ${GRAPHC_DNNL_ROOT} NO_DEFAULT_PATH)
  if(dnnl_VERSION VERSION_LESS 2.6)
    message(FATAL_ERROR "GRAPHC_DNNL_ROOT=${GRAPHC_DNNL_ROOT} holds oneDNN ${dnnl_VERSION}; 2.6 or later is needed")
  endif()
else()
  find_package(dnnl 2.6 REQUIRED CONFIG)
endif()
message(STATUS "graphc: oneDNN ${dnnl_VERSION} (${dnnl_DIR})")
find_package(Threads REQUIRED)
# OpenMP: the plain CPU kernels' loops (and the flag set of the precompiled headers).
find_package(OpenMP REQUIRED)
# Open MPI: launch, rendezvous and CPU collectives of multi-worker runs (executor/dist, the
# only user; its C API, so no MPI C++ bindings).
find_package(MPI 3.1 REQUIRED COMPONENTS C)
find_package(PkgConfig REQUIRED)
pkg_check_modules(TURBOJPEG REQUIRED IMPORTED_TARGET libturbojpeg)
pkg_check_modules(LIBPNG REQUIRED IMPORTED_TARGET libpng)

find_path(CLI11_INCLUDE_DIR CLI/CLI.hpp REQUIRED)
add_library(graphc_cli11 INTERFACE)
target_include_directories(graphc_cli11 SYSTEM INTERFACE ${CLI11_INCLUDE_DIR})

# CUDA: compiled when a toolkit is present, never linked into the main binaries.
set(GRAPHC_HAVE_CUDA OFF)
if(GRAPHC_ENABLE_CUDA)
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 90)
    endif()
    enable_language(CUDA)
    set(CMAKE_CUDA_STANDARD 17)
    find_package(CUDAToolkit REQUIRED)
    find_path(CUDNN_INCLUDE_DIR cudnn.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
    find_library(CUDNN_LIBRARY cudnn HINTS ${CUDAToolkit_LIBRARY_DIR})
    find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
    find_library(NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR})
    if(CUDNN_INCLUDE_DIR AND CUDNN_LIBRARY AND NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
      set(GRAPHC_HAVE_CUDA ON)
      message(STATUS "graphc: CUDA backend enabled (${CMAKE_CUDA_COMPILER_VERSION}, sm_${CMAKE_CUDA_ARCHITECTURES})")
    else()
      message(STATUS "graphc: CUDA toolkit found but cuDNN or NCCL missing; CUDA backend disabled")
    endif()
  else()
    message(STATUS "graphc: no CUDA toolkit; CUDA backend disabled")
  endif()
endif()

# The backends this build links, in registration order. The kernel and device
# registries expand this list (Backends.def) into their registration calls, so
# generic code names no backend (LLVM's Targets.def does the same).
set(GRAPHC_BACKENDS Cpu)
if(GRAPHC_HAVE_CUDA)
  list(APPEND GRAPHC_BACKENDS Cuda)
endif()
set(GRAPHC_BACKEND_ENTRIES "")
foreach(backend IN LISTS GRAPHC_BACKENDS)
  string(APPEND GRAPHC_BACKEND_ENTRIES "GRAPHC_BACKEND(${backend})\n")
endforeach()
set(GRAPHC_GENERATED_DIR ${PROJECT_BINARY_DIR}/generated)
configure_file(${CMAKE_CURRENT_LIST_DIR}/Backends.def.in ${GRAPHC_GENERATED_DIR}/Backends.def
  @ONLY)

find_package(GTest REQUIRED)
# Reference checks use Debian's python3-torch and python3-onnx, which live under /usr/bin/python3.
if(NOT Python3_EXECUTABLE AND EXISTS /usr/bin/python3)
  set(Python3_EXECUTABLE /usr/bin/python3)
endif()
find_package(Python3 REQUIRED COMPONENTS Interpreter)
