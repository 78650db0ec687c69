// Where the two engines' SQL differs in spelling, the translations, in one place: the migrations
// (written once, in SQLite's words, with engine-only blocks), parameter marks and build-name
// patterns. docs/fleet.md ("One schema, two engines") lists the rules.
#pragma once

#include <string>
#include <string_view>

#include "sql_connection.h"

namespace qgate::db::detail {

/// A migration file as `engine` runs it. Lines from "-- engine: sqlite" (or "postgresql") to
/// "-- engine: all" belong to that engine alone. For PostgreSQL the column types are mapped:
/// INTEGER to BIGINT (SQLite's are 64-bit), REAL to DOUBLE PRECISION, TEXT to TEXT COLLATE "C"
/// (SQLite compares text by its bytes), BLOB to BYTEA, and an INTEGER PRIMARY KEY that references no other table
/// (SQLite's row id, assigned on insert) to an identity column. Words in comments and string
/// literals are left alone.
std::string migration_for_engine(std::string_view sql, SqlEngine engine);

/// SQLite's parameter marks in PostgreSQL's: "?N" becomes "$N" and a bare "?" the number after the
/// largest so far, as SQLite counts them. Marks inside string literals, quoted names and comments
/// are left alone.
std::string numbered_parameters(std::string_view sql);

/// A GLOB pattern (*, ?, [...], [!...] or [^...]; case-sensitive, the whole text) as a POSIX
/// regular expression anchored at both ends, every other regex character escaped.
std::string glob_to_regex(std::string_view glob);

}  // namespace qgate::db::detail
