// HistoryStore: opening (foreign/corrupt detection before any write), WAL configuration,
// migrations, transactional inserts with SQLITE_BUSY retries, queries, prune and CSV export.
//
// Opening order (nothing is written until step 4):
//   1. a non-empty file must start with "SQLite format 3\0" (else NotAHistoryDatabase);
//   2. open read-write with busy_timeout; read PRAGMA application_id and sqlite_master
//      (SQLITE_CORRUPT / SQLITE_NOTADB -> HistoryCorrupt);
//   3. application_id must be ours, or 0 with an empty schema (a new database);
//   4. journal_mode=WAL, then migrations in a BEGIN IMMEDIATE transaction.
// A database genscope cannot write (a read-only file, folder or mount; another user's file)
// is opened read-only instead (mode=ro, and immutable=1 when even that needs a write, as WAL
// does without its -shm file): it can be listed, shown and exported; steps 4 and every
// write are skipped, and a write (insert, prune) is HistoryReadOnly. A read-only database
// whose schema is older than this genscope's is HistoryReadOnly too (it cannot be migrated).
#include "genscope/history.hpp"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <algorithm>
#include <thread>
#include <unordered_map>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "genscope/error.hpp"
#include "genscope/run_json.hpp"
#include "perf/perf_internal.hpp"
#include "store/migrations.hpp"
#include "store/sqlite_util.hpp"

namespace genscope {
namespace {

using detail::Statement;

constexpr int kBusyTimeoutMs = 5000;
constexpr auto kRetryDeadline = std::chrono::seconds(60);

// Runs `fn` and retries while it fails with HistoryBusy, until the deadline.
template <class F>
auto with_retry(F&& fn) {
  const auto deadline = std::chrono::steady_clock::now() + kRetryDeadline;
  for (int attempt = 0;; ++attempt) {
    try {
      return fn();
    } catch (const Error& e) {
      if (e.name() != "HistoryBusy" || std::chrono::steady_clock::now() > deadline) throw;
      std::this_thread::sleep_for(std::chrono::milliseconds(1 + attempt % 20));
    }
  }
}

void check_header(const std::filesystem::path& path) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec || size == 0) return;  // absent or empty: a new database
  std::ifstream in(path, std::ios::binary);
  char header[16] = {};
  in.read(header, sizeof header);
  if (in.gcount() != sizeof header || std::memcmp(header, "SQLite format 3", 16) != 0)
    throw Error("NotAHistoryDatabase",
                path.string() + ": not an SQLite database (header mismatch); file left untouched");
}

std::string params_hash(const PipelineInfo& p) {
  std::string canonical;
  for (const auto& [k, v] : p.parameters) canonical += k + "=" + v + "\n";
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx",
                static_cast<unsigned long long>(XXH64(canonical.data(), canonical.size(), 0)));
  return buf;
}

double performance_score(const Run& run) {
  for (const auto& a : run.attachments)
    if (a.type == "performance" && a.data.is_object() && a.data.contains("score") &&
        a.data["score"].is_number())
      return a.data["score"].get<double>();
  return kNaN;
}

double nan_max(double a, double b) {
  if (std::isnan(a)) return b;
  if (std::isnan(b)) return a;
  return std::max(a, b);
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

std::string csv_number(double v) {
  if (std::isnan(v)) return "";
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

}  // namespace

struct HistoryStore::Impl {
  std::filesystem::path path;
  sqlite3* db = nullptr;
  bool read_only = false;
  ~Impl() { sqlite3_close_v2(db); }

  void refuse_write(const char* what) const {
    if (read_only)
      throw Error("HistoryReadOnly", path.string() + ": cannot " + what +
                                         ": the database (or its folder) is not writable by "
                                         "this user; it was opened read-only");
  }
};

namespace {

// An existing database this process cannot write: the file, or the folder that WAL's -wal
// and -shm files live in.
bool only_readable(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return false;
  const std::filesystem::path folder = path.has_parent_path() ? path.parent_path() : ".";
  return ::access(path.c_str(), W_OK) != 0 || ::access(folder.c_str(), W_OK) != 0;
}

// A file: URI for sqlite3_open_v2 (% ? # escaped).
std::string file_uri(const std::filesystem::path& path, const char* query) {
  std::string uri = "file:";
  for (const char c : std::filesystem::absolute(path).string()) {
    if (c == '%' || c == '?' || c == '#') {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", static_cast<unsigned char>(c));
      uri += buf;
    } else {
      uri += c;
    }
  }
  return uri + "?" + query;
}

// Reads the application id and the number of schema objects (the first read of a database).
std::pair<std::int64_t, std::int64_t> inspect(sqlite3* db) {
  return with_retry([&] {
    Statement app(db, "PRAGMA application_id");
    app.step();
    const std::int64_t id = app.int64(0);
    Statement count(db, "SELECT count(*) FROM sqlite_master");
    count.step();
    return std::pair<std::int64_t, std::int64_t>(id, count.int64(0));
  });
}

}  // namespace

HistoryStore::HistoryStore(const std::filesystem::path& path)
    : HistoryStore(path, kHistorySchemaVersion) {}

HistoryStore::HistoryStore(const std::filesystem::path& path, int version)
    : impl_(std::make_unique<Impl>()) {
  impl_->path = path;
  check_header(path);
  if (path.has_parent_path()) {
    std::error_code ec;
    std::filesystem::create_directories(path.parent_path(), ec);
  }
  impl_->read_only = only_readable(path);
  auto open = [&](const std::string& name, int flags) {
    if (impl_->db != nullptr) sqlite3_close_v2(impl_->db);
    impl_->db = nullptr;
    const int rc = sqlite3_open_v2(name.c_str(), &impl_->db, flags | SQLITE_OPEN_NOMUTEX, nullptr);
    if (rc != SQLITE_OK) throw Error("HistoryOpenFailed", path.string() + ": " + sqlite3_errstr(rc));
    sqlite3_busy_timeout(impl_->db, kBusyTimeoutMs);
    sqlite3_extended_result_codes(impl_->db, 1);
  };
  std::pair<std::int64_t, std::int64_t> found;
  if (!impl_->read_only) {
    open(path.string(), SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
    found = inspect(impl_->db);  // read-only inspection first: a foreign file stays untouched
  } else {
    const int ro = SQLITE_OPEN_READONLY | SQLITE_OPEN_URI;
    try {
      open(file_uri(path, "mode=ro"), ro);
      found = inspect(impl_->db);
    } catch (const Error& e) {
      if (e.name() == "HistoryCorrupt") throw;
      // WAL without a -shm file in a folder we cannot write: read the file as it is.
      open(file_uri(path, "mode=ro&immutable=1"), ro);
      found = inspect(impl_->db);
    }
  }
  sqlite3* db = impl_->db;
  const auto [application_id, objects] = found;
  if (application_id != kHistoryApplicationId && !(application_id == 0 && objects == 0))
    throw Error("NotAHistoryDatabase",
                path.string() + ": SQLite database of another application (application_id " +
                    std::to_string(application_id) + "); file left untouched");
  if (impl_->read_only) {
    Statement v(db, "PRAGMA user_version");
    v.step();
    const int current = static_cast<int>(v.int64(0));
    if (current > kHistorySchemaVersion)
      throw Error("HistoryTooNew", path.string() + ": schema version " + std::to_string(current) +
                                       " is newer than " + std::to_string(kHistorySchemaVersion));
    if (current < version) impl_->refuse_write("migrate its schema");
    return;
  }
  with_retry([&] {
    Statement wal(db, "PRAGMA journal_mode=WAL");
    wal.step();
    return 0;
  });
  detail::exec(db, "PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON;");
  with_retry([&] {
    detail::exec(db, "BEGIN IMMEDIATE");
    try {
      Statement v(db, "PRAGMA user_version");
      v.step();
      const int current = static_cast<int>(v.int64(0));
      if (current > kHistorySchemaVersion)
        throw Error("HistoryTooNew", path.string() + ": schema version " +
                                         std::to_string(current) + " is newer than " +
                                         std::to_string(kHistorySchemaVersion));
      if (current < version) detail::migrate(db, current, version);
      detail::exec(db, "COMMIT");
    } catch (...) {
      sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
      throw;
    }
    return 0;
  });
}

HistoryStore::~HistoryStore() = default;
HistoryStore::HistoryStore(HistoryStore&&) noexcept = default;
HistoryStore& HistoryStore::operator=(HistoryStore&&) noexcept = default;

const std::filesystem::path& HistoryStore::path() const noexcept { return impl_->path; }

std::string HistoryStore::insert(const Run& run) {
  if (run.id.empty()) throw Error("InvalidRunDocument", "run without id cannot be stored");
  impl_->refuse_write("store a run");
  // Text that is not UTF-8 (a program path, a label, a program's output) is replaced, not fatal.
  const std::string document = to_json(run).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  double run_rss = kNaN, run_gpu = kNaN;
  for (const auto& s : run.steps) {
    run_rss = nan_max(run_rss, detail::step_rss_max(s));
    run_gpu = nan_max(run_gpu, detail::step_gpu_peak(s));
  }
  const std::string hash = params_hash(run.pipeline);
  sqlite3* db = impl_->db;
  with_retry([&] {
    detail::exec(db, "BEGIN IMMEDIATE");
    try {
      Statement del(db, "DELETE FROM runs WHERE run_id = ?");
      del.bind(1, run.id).step();
      Statement ins(db,
                    "INSERT INTO runs (run_id, start_unix_ns, start_utc, pipeline, model, "
                    "architecture, host, gpu, params_hash, total_ns, peak_rss_bytes, "
                    "peak_gpu_bytes, score, document) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)");
      ins.bind(1, run.id).bind(2, run.start_unix_ns).bind(3, run.start_utc);
      ins.bind(4, run.pipeline.name).bind(5, run.pipeline.model);
      ins.bind(6, run.pipeline.architecture).bind(7, run.host.hostname);
      ins.bind(8, run.gpus.empty() ? std::string_view() : std::string_view(run.gpus[0].name));
      ins.bind(9, hash).bind(10, run.duration_ns).bind(11, run_rss).bind(12, run_gpu);
      ins.bind(13, performance_score(run)).bind(14, document);
      ins.step();
      const std::int64_t row = sqlite3_last_insert_rowid(db);
      Statement step(db,
                     "INSERT INTO steps (run, ordinal, name, kind, duration_ns, peak_rss_bytes, "
                     "peak_gpu_bytes) VALUES (?,?,?,?,?,?,?)");
      for (std::size_t i = 0; i < run.steps.size(); ++i) {
        const auto& s = run.steps[i];
        step.reset();
        step.bind(1, row).bind(2, static_cast<std::int64_t>(i)).bind(3, s.name);
        step.bind(4, to_string(s.kind)).bind(5, s.duration_ns);
        step.bind(6, detail::step_rss_max(s));
        step.bind(7, detail::step_gpu_peak(s));
        step.step();
      }
      Statement label(db, "INSERT INTO run_labels (run, key, value) VALUES (?,?,?)");
      for (const auto& [k, v] : run.labels) {
        label.reset();
        label.bind(1, row).bind(2, k).bind(3, v).step();
      }
      detail::exec(db, "COMMIT");
    } catch (...) {
      sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
      throw;
    }
    return 0;
  });
  return run.id;
}

std::vector<HistoryRun> HistoryStore::list(const HistoryQuery& query) const {
  std::string sql =
      "SELECT run_id, start_utc, start_unix_ns, pipeline, model, architecture, host, gpu, "
      "params_hash, total_ns, peak_rss_bytes, peak_gpu_bytes, score FROM runs WHERE 1";
  if (!query.pipeline.empty()) sql += " AND pipeline = ?";
  for (std::size_t i = 0; i < query.labels.size(); ++i)
    sql += " AND EXISTS (SELECT 1 FROM run_labels l WHERE l.run = runs.id AND l.key = ? AND "
           "l.value = ?)";
  sql += " ORDER BY start_unix_ns DESC, id DESC";
  if (query.limit > 0) sql += " LIMIT " + std::to_string(query.limit);
  return with_retry([&] {
    Statement st(impl_->db, sql.c_str());
    int index = 1;
    if (!query.pipeline.empty()) st.bind(index++, query.pipeline);
    for (const auto& [k, v] : query.labels) {
      st.bind(index++, k);
      st.bind(index++, v);
    }
    std::vector<HistoryRun> out;
    while (st.step()) {
      HistoryRun r;
      r.run_id = st.text(0);
      r.start_utc = st.text(1);
      r.start_unix_ns = st.int64(2);
      r.pipeline = st.text(3);
      r.model = st.text(4);
      r.architecture = st.text(5);
      r.host = st.text(6);
      r.gpu = st.text(7);
      r.params_hash = st.text(8);
      r.total_ns = st.int64(9);
      r.peak_rss_bytes = st.real(10);
      r.peak_gpu_bytes = st.real(11);
      r.score = st.real(12);
      out.push_back(std::move(r));
    }
    return out;
  });
}

std::optional<nlohmann::json> HistoryStore::document(std::string_view id) const {
  if (id.empty()) return std::nullopt;
  const std::string text = with_retry([&] {
    Statement exact(impl_->db, "SELECT document FROM runs WHERE run_id = ?");
    exact.bind(1, id);
    if (exact.step()) return exact.text(0);
    Statement prefix(impl_->db,
                     "SELECT document FROM runs WHERE substr(run_id, 1, ?) = ? LIMIT 2");
    prefix.bind(1, static_cast<std::int64_t>(id.size())).bind(2, id);
    if (!prefix.step()) return std::string();
    std::string found = prefix.text(0);
    if (prefix.step())
      throw Error("AmbiguousRunId", "run id prefix \"" + std::string(id) + "\" matches several runs");
    return found;
  });
  if (text.empty()) return std::nullopt;
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    throw Error("HistoryCorrupt", "stored document of run " + std::string(id) + ": " + e.what());
  }
}

std::vector<Observation> HistoryStore::observations(std::string_view pipeline) const {
  // Two plain scans instead of a join + sort: the runs (10k rows) into a map, then the steps
  // in table order, which groups each run's steps (inserted in one transaction).
  return with_retry([&] {
    struct RunRow {
      std::string pipeline, run_id;
      std::int64_t start_unix_ns;
    };
    std::unordered_map<std::int64_t, RunRow> runs_by_row;
    std::vector<Observation> out;
    Statement runs(impl_->db, pipeline.empty()
                                  ? "SELECT id, pipeline, start_unix_ns, total_ns, run_id FROM runs"
                                  : "SELECT id, pipeline, start_unix_ns, total_ns, run_id FROM runs "
                                    "WHERE pipeline = ?");
    if (!pipeline.empty()) runs.bind(1, pipeline);
    while (runs.step()) {
      RunRow row{runs.text(1), runs.text(4), runs.int64(2)};
      out.push_back({row.pipeline, "(run)", row.start_unix_ns,
                     static_cast<double>(runs.int64(3)), row.run_id});
      runs_by_row.emplace(runs.int64(0), std::move(row));
    }
    Statement steps(impl_->db, "SELECT run, name, duration_ns FROM steps");
    std::int64_t current_run = -1;
    const RunRow* current = nullptr;
    std::vector<std::string> seen;  // first step of each name per run
    while (steps.step()) {
      const std::int64_t row = steps.int64(0);
      if (row != current_run) {
        current_run = row;
        const auto it = runs_by_row.find(row);
        current = it == runs_by_row.end() ? nullptr : &it->second;
        seen.clear();
      }
      if (current == nullptr) continue;
      std::string name = steps.text(1);
      if (std::find(seen.begin(), seen.end(), name) != seen.end()) continue;
      seen.push_back(name);
      out.push_back({current->pipeline, std::move(name), current->start_unix_ns,
                     static_cast<double>(steps.int64(2)), current->run_id});
    }
    return out;
  });
}

std::size_t HistoryStore::prune(std::int64_t before_unix_ns) {
  impl_->refuse_write("prune");
  return with_retry([&] {
    Statement del(impl_->db, "DELETE FROM runs WHERE start_unix_ns < ?");
    del.bind(1, before_unix_ns).step();
    return static_cast<std::size_t>(sqlite3_changes(impl_->db));
  });
}

std::string HistoryStore::export_csv(const HistoryQuery& query) const {
  std::string out =
      "run_id,start_utc,pipeline,model,architecture,host,gpu,params_hash,total_seconds,"
      "peak_rss_bytes,peak_gpu_bytes,score\n";
  for (const auto& r : list(query)) {
    out += csv_field(r.run_id) + "," + csv_field(r.start_utc) + "," + csv_field(r.pipeline) +
           "," + csv_field(r.model) + "," + csv_field(r.architecture) + "," + csv_field(r.host) +
           "," + csv_field(r.gpu) + "," + r.params_hash + "," +
           csv_number(static_cast<double>(r.total_ns) / 1e9) + "," +
           csv_number(r.peak_rss_bytes) + "," + csv_number(r.peak_gpu_bytes) + "," +
           csv_number(r.score) + "\n";
  }
  return out;
}

void HistoryStore::check() const {
  Statement st(impl_->db, "PRAGMA integrity_check");
  std::string result;
  while (st.step()) result += (result.empty() ? "" : "; ") + st.text(0);
  if (result != "ok") throw Error("HistoryCorrupt", impl_->path.string() + ": " + result);
}

int HistoryStore::schema_version() const {
  Statement st(impl_->db, "PRAGMA user_version");
  st.step();
  return static_cast<int>(st.int64(0));
}

std::size_t HistoryStore::size() const {
  Statement st(impl_->db, "SELECT count(*) FROM runs");
  st.step();
  return static_cast<std::size_t>(st.int64(0));
}

std::filesystem::path default_history_path() {
  const char* xdg = std::getenv("XDG_DATA_HOME");
  if (xdg != nullptr && *xdg != '\0') return std::filesystem::path(xdg) / "genscope" / "history.db";
  const char* home = std::getenv("HOME");
  const std::filesystem::path base = home != nullptr && *home != '\0' ? home : ".";
  return base / ".local" / "share" / "genscope" / "history.db";
}

std::string record_run(const std::filesystem::path& db_path, const Run& run) {
  HistoryStore store(db_path.empty() ? default_history_path() : db_path);
  return store.insert(run);
}

}  // namespace genscope
