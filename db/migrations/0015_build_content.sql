-- 0015_build_content: the bytes of uploaded builds, kept in the database by their sha256, so that
-- every daemon of a fleet sharing one PostgreSQL database can run a build that another daemon took
-- in (docs/fleet.md, "Builds on every host"). A build's content is one build_contents row (its size
-- and how it is cut) and its bytes in chunks of at most chunk_bytes, numbered from 0, so that no
-- single value is huge and a reader streams them one by one. The rows are written in one
-- transaction: a build_contents row means every chunk is there. Content is keyed by sha256 alone,
-- not by build row: two builds with the same bytes share it.
CREATE TABLE build_contents (
  sha256 TEXT PRIMARY KEY,
  size_bytes INTEGER NOT NULL,
  chunk_bytes INTEGER NOT NULL,
  chunk_count INTEGER NOT NULL,
  created_ms INTEGER NOT NULL
);
CREATE TABLE build_content_chunks (
  sha256 TEXT NOT NULL REFERENCES build_contents(sha256) ON DELETE CASCADE,
  chunk_index INTEGER NOT NULL,
  data BLOB NOT NULL,
  PRIMARY KEY (sha256, chunk_index)
);
