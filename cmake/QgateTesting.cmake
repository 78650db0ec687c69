# Test helpers. Labels: `unit` runs everywhere; `gpu` needs a CUDA device and exits with
# kQgateSkipCode (77) without one, which ctest reports as skipped, never as passed.
include(GoogleTest)
set(QGATE_SKIP_RETURN_CODE 77)

# qgate_add_gtest(NAME SOURCES... LIBS... [LABEL unit|gpu] [TIMEOUT s])
function(qgate_add_gtest name)
  cmake_parse_arguments(ARG "" "LABEL;TIMEOUT" "SOURCES;LIBS" ${ARGN})
  if(NOT ARG_LABEL)
    set(ARG_LABEL unit)
  endif()
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 600)
  endif()
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_LIBS} GTest::gtest GTest::gtest_main)
  add_test(NAME ${name} COMMAND ${name} --gtest_brief=1)
  set_tests_properties(${name} PROPERTIES LABELS ${ARG_LABEL} TIMEOUT ${ARG_TIMEOUT}
                                          SKIP_RETURN_CODE ${QGATE_SKIP_RETURN_CODE})
endfunction()
