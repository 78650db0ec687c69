# Test helpers. Each gtest case is its own ctest entry, named <binary>.<Suite>.<Case> (e.g.
# qgate_ab_statistics_test.AbStatistics.ExactWilcoxon), so a case that calls GTEST_SKIP reads as
# skipped: gtest prints "[  SKIPPED ]" for it, and CMake's GoogleTest module gives every discovered
# case SKIP_REGULAR_EXPRESSION "\[  SKIPPED \]". A case that fails never prints that line.
# The cases are listed when ctest starts (DISCOVERY_MODE PRE_TEST), not when building: building
# never runs a test binary, and the GPU tests are listed on a machine without a GPU too.
# Labels: `unit` runs everywhere, in-process or with a worker or two, and `ctest -L unit` takes
# under a minute; `e2e` starts real daemons, clients or browsers (every `*_e2e_test` binary is one);
# `slow` runs a whole sweep on the CPU; `gpu` needs a CUDA device, and without one every case is
# skipped (gpu_test_main.cpp), never passed.
include(GoogleTest)
# A binary or non-gtest test that exits with this code reads as skipped.
set(QGATE_SKIP_RETURN_CODE 77)
# The ctest fixture `postgres` (tests postgres.start and postgres.stop, tests/support/) starts one
# throwaway PostgreSQL server for every POSTGRES test and writes its connection string to this file;
# ctest adds the fixture to any run that selects such a test, whatever the label or -R filter.
set(QGATE_TEST_POSTGRES_DIR ${CMAKE_BINARY_DIR}/test-postgres)
set(QGATE_TEST_POSTGRES_FILE ${QGATE_TEST_POSTGRES_DIR}/conninfo)

# qgate_add_gtest(NAME SOURCES... LIBS... [LABEL unit|e2e|slow|gpu] [TIMEOUT s] [RUN_SERIAL] [OWN_MAIN]
#                 [POSTGRES])
#   LABEL       default e2e for a NAME ending in _e2e_test, else unit.
#   TIMEOUT     seconds per case (default 600).
#   RUN_SERIAL  no other test runs beside any of its cases (the daemon tests time runs on the CPU).
#   OWN_MAIN    the sources bring main() (the GPU tests); otherwise gtest_main is linked.
#   POSTGRES    its cases share the fixture's PostgreSQL server: they require the fixture `postgres`
#               and see QGATE_TEST_POSTGRES_FILE (tests/support/test_postgres.h reads it; link
#               qgate_test_postgres). Run by hand, without it, the binary starts a server of its own.
function(qgate_add_gtest name)
  cmake_parse_arguments(ARG "RUN_SERIAL;OWN_MAIN;POSTGRES" "LABEL;TIMEOUT" "SOURCES;LIBS" ${ARGN})
  if(NOT ARG_LABEL AND name MATCHES "_e2e_test$")
    set(ARG_LABEL e2e)
  elseif(NOT ARG_LABEL)
    set(ARG_LABEL unit)
  endif()
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 600)
  endif()
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_LIBS} GTest::gtest)
  if(NOT ARG_OWN_MAIN)
    target_link_libraries(${name} PRIVATE GTest::gtest_main)
  endif()
  set(properties LABELS ${ARG_LABEL} TIMEOUT ${ARG_TIMEOUT} SKIP_RETURN_CODE ${QGATE_SKIP_RETURN_CODE})
  if(ARG_RUN_SERIAL)
    list(APPEND properties RUN_SERIAL TRUE)
  endif()
  if(ARG_POSTGRES)
    list(APPEND properties FIXTURES_REQUIRED postgres ENVIRONMENT "QGATE_TEST_POSTGRES_FILE=${QGATE_TEST_POSTGRES_FILE}")
  endif()
  # NO_PRETTY_VALUES: ids are gtest's own names (Suite.Case/param_name), as --gtest_filter takes
  # them; CMake 3.25's "pretty" values would append the GetParam() dump to named parameters.
  gtest_discover_tests(${name}
    TEST_PREFIX "${name}."
    DISCOVERY_MODE PRE_TEST
    DISCOVERY_TIMEOUT 60
    NO_PRETTY_TYPES NO_PRETTY_VALUES
    PROPERTIES ${properties})
endfunction()
