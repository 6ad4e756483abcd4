# GRAPHC_FUZZ: the build scripts/fuzz uses (build-fuzz/). Every target is compiled with
# libFuzzer's coverage instrumentation (fuzzer-no-link) and AddressSanitizer with
# UndefinedBehaviorSanitizer, so the fuzzer sees the branches of the readers and of everything
# they call, and any memory error or undefined behaviour stops it with the input that caused
# it. The fuzz targets themselves link libFuzzer's main (tests/fuzz/CMakeLists.txt). clang only:
# GCC has no libFuzzer.
if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  message(FATAL_ERROR "GRAPHC_FUZZ needs clang (scripts/fuzz configures clang-14)")
endif()
if(GRAPHC_SANITIZE)
  message(FATAL_ERROR "GRAPHC_FUZZ brings its own sanitizers; leave GRAPHC_SANITIZE empty")
endif()
add_compile_options(-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all
                    -fno-omit-frame-pointer)
add_link_options(-fsanitize=address,undefined)
