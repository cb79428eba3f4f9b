// Ordered schema migrations. Never edit a released migration: append a new one.
//
//   v1  runs (document + indexed columns), steps (per-step rows), application_id
//   v2  run_labels (key/value per run, backfilled from the stored documents)
#include "store/migrations.hpp"

#include <string>

#include "genscope/history.hpp"
#include "store/sqlite_util.hpp"

namespace genscope::detail {
namespace {

const char* const kMigrations[] = {
    // v1
    R"sql(
CREATE TABLE runs (
  id INTEGER PRIMARY KEY,
  run_id TEXT NOT NULL UNIQUE,
  start_unix_ns INTEGER NOT NULL,
  start_utc TEXT NOT NULL,
  pipeline TEXT NOT NULL,
  model TEXT NOT NULL,
  architecture TEXT NOT NULL,
  host TEXT NOT NULL,
  gpu TEXT NOT NULL,
  params_hash TEXT NOT NULL,
  total_ns INTEGER NOT NULL,
  peak_rss_bytes REAL,
  peak_gpu_bytes REAL,
  score REAL,
  document TEXT NOT NULL
);
CREATE INDEX runs_pipeline_start ON runs(pipeline, start_unix_ns);
CREATE INDEX runs_start ON runs(start_unix_ns);
CREATE INDEX runs_model ON runs(model);
CREATE INDEX runs_params ON runs(params_hash);
CREATE TABLE steps (
  run INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  ordinal INTEGER NOT NULL,
  name TEXT NOT NULL,
  kind TEXT NOT NULL,
  duration_ns INTEGER NOT NULL,
  peak_rss_bytes REAL,
  peak_gpu_bytes REAL,
  PRIMARY KEY (run, ordinal)
);
CREATE INDEX steps_name ON steps(name);
)sql",
    // v2
    R"sql(
CREATE TABLE run_labels (
  run INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  key TEXT NOT NULL,
  value TEXT NOT NULL,
  PRIMARY KEY (run, key)
);
CREATE INDEX run_labels_key_value ON run_labels(key, value);
INSERT INTO run_labels (run, key, value)
  SELECT runs.id, j.key, j.value FROM runs, json_each(runs.document, '$.labels') AS j
  WHERE json_type(runs.document, '$.labels') = 'object';
)sql",
};

static_assert(sizeof(kMigrations) / sizeof(kMigrations[0]) == kHistorySchemaVersion);

}  // namespace

void migrate(sqlite3* db, int current, int target) {
  for (int version = current + 1; version <= target; ++version) {
    exec(db, kMigrations[version - 1]);
    if (version == 1)
      exec(db, ("PRAGMA application_id = " + std::to_string(kHistoryApplicationId)).c_str());
  }
  if (target > current) exec(db, ("PRAGMA user_version = " + std::to_string(target)).c_str());
}

}  // namespace genscope::detail
