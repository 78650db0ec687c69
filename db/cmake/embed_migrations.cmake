# Turns db/migrations/NNNN_name.sql into one C++ source holding each file as a raw string literal, so
# the store library carries its schema and never reads SQL files at run time.
# Script mode: cmake -DMIGRATIONS_DIR=<dir> -DOUTPUT=<file.cpp> -P embed_migrations.cmake
if(NOT MIGRATIONS_DIR OR NOT OUTPUT)
  message(FATAL_ERROR "embed_migrations.cmake needs -DMIGRATIONS_DIR and -DOUTPUT")
endif()

file(GLOB sql_files RELATIVE ${MIGRATIONS_DIR} ${MIGRATIONS_DIR}/*.sql)
list(SORT sql_files)
if(NOT sql_files)
  message(FATAL_ERROR "no migrations in ${MIGRATIONS_DIR}")
endif()

set(delimiter "qgate_sql")
set(entries "")
set(expected_version 1)
foreach(file_name IN LISTS sql_files)
  # The number is the schema version it leads to: 0001, 0002, ... with no gaps, so a missing or
  # doubled file fails the build instead of producing a database no other build agrees with.
  if(NOT file_name MATCHES "^([0-9][0-9][0-9][0-9])_([a-z0-9_]+)\\.sql$")
    message(FATAL_ERROR "migration ${file_name}: name must be NNNN_lower_snake.sql")
  endif()
  set(name "${CMAKE_MATCH_1}_${CMAKE_MATCH_2}")
  math(EXPR version "${CMAKE_MATCH_1}")
  if(NOT version EQUAL expected_version)
    message(FATAL_ERROR "migration ${file_name}: expected number ${expected_version} (no gaps, no duplicates)")
  endif()
  math(EXPR expected_version "${expected_version} + 1")

  file(READ ${MIGRATIONS_DIR}/${file_name} sql)
  string(FIND "${sql}" ")${delimiter}\"" clash)
  if(NOT clash EQUAL -1)
    message(FATAL_ERROR "migration ${file_name} contains the raw-string delimiter )${delimiter}\"")
  endif()
  string(APPEND entries "    Migration{${version}, \"${name}\", R\"${delimiter}(${sql})${delimiter}\"},\n")
endforeach()

set(content "// Generated from db/migrations/*.sql by db/cmake/embed_migrations.cmake. Do not edit.
#include \"detail/migrations.h\"

namespace qgate::db::detail {

std::span<const Migration> embedded_migrations() {
  static constexpr Migration migrations[] = {
${entries}  };
  return migrations;
}

}  // namespace qgate::db::detail
")
# Always rewritten: the build runs this only when a migration or this script is newer than OUTPUT.
file(WRITE ${OUTPUT} "${content}")
