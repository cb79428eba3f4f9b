// The run history: an SQLite database of run documents with indexed columns, per-step rows
// and schema migrations. Default path $XDG_DATA_HOME/genscope/history.db
// (~/.local/share/genscope/history.db). Schema and guarantees: docs/history.md.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "genscope/regression.hpp"
#include "genscope/run.hpp"

namespace genscope {

/// The indexed columns of one stored run.
struct HistoryRun {
  std::string run_id;
  std::string start_utc;
  std::int64_t start_unix_ns = 0;
  std::string pipeline;
  std::string model;
  std::string architecture;
  std::string host;
  std::string gpu;          ///< Name of GPU 0, empty without GPU.
  std::string params_hash;  ///< xxh64 of the sorted pipeline parameters, hex.
  std::int64_t total_ns = 0;
  double peak_rss_bytes = kNaN;
  double peak_gpu_bytes = kNaN;
  double score = kNaN;  ///< From a "performance" attachment, NaN when none.
};

/// A filter for list().
struct HistoryQuery {
  std::string pipeline;                       ///< Empty = all.
  std::map<std::string, std::string> labels;  ///< All must match the run labels.
  std::size_t limit = 0;                      ///< 0 = no limit; newest first.
};

/// The latest schema version (PRAGMA user_version after migrations).
inline constexpr int kHistorySchemaVersion = 2;
/// PRAGMA application_id of a genscope history database ('GSCH').
inline constexpr std::int32_t kHistoryApplicationId = 0x47534348;

/// A connection to a history database. Safe to use from several processes at once.
class HistoryStore {
 public:
  /// Opens or creates the database and migrates it. Throws genscope::Error:
  /// "NotAHistoryDatabase" (foreign file: nothing written), "HistoryCorrupt",
  /// "HistoryTooNew" (schema from a newer genscope), "HistoryOpenFailed". An existing
  /// database this user cannot write (read-only file, folder or mount) is opened read-only:
  /// readable; insert() and prune() throw "HistoryReadOnly" (so does an old schema there).
  explicit HistoryStore(const std::filesystem::path& path);
  /// Opens and migrates only up to `version` (tests of migrations).
  HistoryStore(const std::filesystem::path& path, int version);
  ~HistoryStore();
  HistoryStore(HistoryStore&&) noexcept;
  HistoryStore& operator=(HistoryStore&&) noexcept;

  /// Stores a run (document + columns + steps + labels) in one transaction, retrying on
  /// SQLITE_BUSY. Replaces a run with the same id. Returns the run id.
  std::string insert(const Run& run);
  /// Runs matching the query, newest first.
  std::vector<HistoryRun> list(const HistoryQuery& query = {}) const;
  /// The run document of a run id (or a unique id prefix); nullopt when absent.
  /// Throws genscope::Error("AmbiguousRunId").
  std::optional<nlohmann::json> document(std::string_view id) const;
  /// Per-step and whole-run ("(run)") durations, oldest first, for regression detection.
  std::vector<Observation> observations(std::string_view pipeline = {}) const;
  /// Deletes runs that started before `before_unix_ns`; returns how many.
  std::size_t prune(std::int64_t before_unix_ns);
  /// CSV of list() (header row + one row per run).
  std::string export_csv(const HistoryQuery& query = {}) const;
  /// PRAGMA integrity_check; throws genscope::Error("HistoryCorrupt") unless "ok".
  void check() const;
  /// PRAGMA user_version.
  int schema_version() const;
  /// Number of stored runs.
  std::size_t size() const;
  /// The database path.
  const std::filesystem::path& path() const noexcept;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// $XDG_DATA_HOME/genscope/history.db, else $HOME/.local/share/genscope/history.db.
std::filesystem::path default_history_path();
/// Opens `db_path` (default_history_path() when empty) and inserts the run.
std::string record_run(const std::filesystem::path& db_path, const Run& run);

}  // namespace genscope
