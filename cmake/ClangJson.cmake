# clang 14 cannot compile LLVM 14's llvm/Support/JSON.h in C++20 mode against GCC 12's libstdc++
# ("arithmetic on a pointer to an incomplete type 'llvm::json::Value'": json::Array's inline
# members use std::vector<Value>, whose members are constexpr in C++20 and which clang then
# instantiates while Value is still incomplete; LLVM 15 reordered the header). GCC accepts it, so
# only the clang builds (fuzzing, ThreadSanitizer) need a way round: the translation units that
# include JSON.h, directly or through the project's headers (at any depth), are compiled as C++17 (they
# use nothing of C++20 that clang does not accept as an extension there). Called from the top-level CMakeLists.txt once every target exists.

# Every target defined in `dir` and below it.
function(graphc_targets_below out dir)
  get_property(targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
  get_property(subdirs DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
  foreach(sub IN LISTS subdirs)
    graphc_targets_below(below ${sub})
    list(APPEND targets ${below})
  endforeach()
  set(${out} ${targets} PARENT_SCOPE)
endfunction()

function(graphc_compile_json_users_as_cxx17)
  set(pattern "#include \"llvm/Support/JSON.h\"")
  file(GLOB_RECURSE headers RELATIVE ${PROJECT_SOURCE_DIR} CONFIGURE_DEPENDS
    ${PROJECT_SOURCE_DIR}/ir/*.h ${PROJECT_SOURCE_DIR}/frontend/*.h
    ${PROJECT_SOURCE_DIR}/passes/*.h ${PROJECT_SOURCE_DIR}/placement/*.h
    ${PROJECT_SOURCE_DIR}/kernels/*.h ${PROJECT_SOURCE_DIR}/executor/*.h
    ${PROJECT_SOURCE_DIR}/tools/*.h ${PROJECT_SOURCE_DIR}/tests/*.h)
  # Headers that include JSON.h directly, then those that include one of
  # them, and so on until no header is added.
  set(users "")
  set(grown TRUE)
  while(grown)
    set(grown FALSE)
    string(REPLACE "." "\\." regex "${pattern}")
    foreach(h IN LISTS headers)
      if(h IN_LIST users)
        continue()
      endif()
      file(STRINGS ${PROJECT_SOURCE_DIR}/${h} hit REGEX "^(${regex})")
      if(hit)
        list(APPEND users ${h})
        string(APPEND pattern "|#include \"${h}\"")
        set(grown TRUE)
      endif()
    endforeach()
  endwhile()
  string(REPLACE "." "\\." pattern "${pattern}")
  graphc_targets_below(targets ${PROJECT_SOURCE_DIR})
  foreach(target IN LISTS targets)
    get_target_property(type ${target} TYPE)
    if(NOT type MATCHES "^(STATIC_LIBRARY|SHARED_LIBRARY|MODULE_LIBRARY|OBJECT_LIBRARY|EXECUTABLE)$")
      continue()
    endif()
    get_target_property(dir ${target} SOURCE_DIR)
    get_target_property(sources ${target} SOURCES)
    foreach(s IN LISTS sources)
      if(NOT s MATCHES "\\.cpp$")
        continue()
      endif()
      if(NOT IS_ABSOLUTE ${s})
        set(s ${dir}/${s})
      endif()
      file(STRINGS ${s} hit REGEX "^(${pattern})")
      if(hit)
        set_source_files_properties(${s} DIRECTORY ${dir} PROPERTIES COMPILE_OPTIONS "-std=c++17;-Wno-c++20-extensions")
      endif()
    endforeach()
  endforeach()
endfunction()
