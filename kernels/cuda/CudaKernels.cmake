# The CUDA kernels, compiled into graphc_kernels when the toolkit was found
# (GRAPHC_HAVE_CUDA). Device code lives in .cu files (C++17, nvcc); kernel
# classes and library tables in .cpp files (C++20). Only static cudart is
# linked; cuDNN and cuBLAS are opened at run time (CudaLibraries.cpp), so
# their headers are needed here but not their libraries.
file(GLOB GRAPHC_CUDA_KERNEL_SOURCES CONFIGURE_DEPENDS
  ${CMAKE_CURRENT_LIST_DIR}/*.cpp ${CMAKE_CURRENT_LIST_DIR}/*.cu)
target_sources(graphc_kernels PRIVATE ${GRAPHC_CUDA_KERNEL_SOURCES})
target_include_directories(graphc_kernels SYSTEM PUBLIC ${CUDNN_INCLUDE_DIR})
target_link_libraries(graphc_kernels PUBLIC CUDA::cudart_static ${CMAKE_DL_LIBS})
target_compile_definitions(graphc_kernels PUBLIC GRAPHC_HAVE_CUDA=1)
set_target_properties(graphc_kernels PROPERTIES CUDA_RUNTIME_LIBRARY Static)
target_compile_options(graphc_kernels PRIVATE
  $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra,-Wno-unused-parameter>
  $<$<AND:$<COMPILE_LANGUAGE:CUDA>,$<BOOL:${GRAPHC_WERROR}>>:--Werror=all-warnings>)
