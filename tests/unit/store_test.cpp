// Tests of the run history store with real SQLite: schema, migrations, queries, concurrent
// writer processes, SIGKILL mid-write, and foreign / corrupt files.
#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <fstream>
#include <random>
#include <set>
#include <sstream>

#include "genscope/error.hpp"
#include "genscope/history.hpp"
#include "genscope/regression.hpp"

namespace genscope {
namespace {

namespace fs = std::filesystem;
constexpr std::int64_t kSec = 1'000'000'000;

fs::path scratch(const std::string& name) {
  const char* tmp = std::getenv("GENSCOPE_TEST_TMP");
  const fs::path dir = fs::path(tmp != nullptr ? tmp : "/tmp") / ("store_test_" + name + "_" +
                                                                  std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

genscope::Run make_run(const std::string& id, std::int64_t start_s, std::int64_t sampling_ns,
                       std::size_t samples = 0) {
  genscope::Run run;
  run.id = id;
  run.start_unix_ns = start_s * kSec;
  run.start_utc = "2026-11-21T12:00:00Z";
  run.pipeline.name = "sdxl";
  run.pipeline.model = "sdxl-base-1.0";
  run.pipeline.architecture = "UNet";
  run.pipeline.parameters = {{"steps", "30"}, {"resolution", "1024x1024"}};
  run.host.hostname = "node1";
  run.gpus.push_back({0, "NVIDIA H200", "GPU-1", "560.1", 141e9});
  run.labels = {{"branch", "main"}};
  const char* names[] = {"load", "encode", "sampling", "decode"};
  const StepKind kinds[] = {StepKind::kModelLoading, StepKind::kTextEncoding, StepKind::kSampling,
                            StepKind::kVaeDecode};
  std::int64_t t = 0;
  for (int i = 0; i < 4; ++i) {
    StepRecord s;
    s.id = i;
    s.name = names[i];
    s.kind = kinds[i];
    s.status = StepStatus::kOk;
    s.start_offset_ns = t;
    s.duration_ns = i == 2 ? sampling_ns : kSec / 4;
    MetricFigures rss;
    rss.name = "process.rss_bytes";
    rss.before = 1e9;
    rss.peak = 2e9 + i;
    rss.after = 1.5e9;
    MetricFigures gpu = rss;
    gpu.name = "gpu0.used_bytes";
    gpu.peak = 10e9 + i * 1e9;
    s.metrics = {rss, gpu};
    t += s.duration_ns;
    run.steps.push_back(s);
  }
  run.duration_ns = t;
  run.series.metrics = {"process.rss_bytes", "gpu0.used_bytes"};
  run.series.units = {Unit::kBytes, Unit::kBytes};
  for (std::size_t i = 0; i < samples; ++i) {
    run.series.offset_ns.push_back(static_cast<std::int64_t>(i) * 1'000'000);
    run.series.values.push_back(1e9 + static_cast<double>(i));
    run.series.values.push_back(10e9 + static_cast<double>(i));
  }
  run.attachments.push_back({"performance", "performance", {{"score", 87.5}, {"met", false}}});
  return run;
}

void sql(const fs::path& path, const std::string& statement) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  char* error = nullptr;
  const int rc = sqlite3_exec(db, statement.c_str(), nullptr, nullptr, &error);
  EXPECT_EQ(rc, SQLITE_OK) << (error ? error : "");
  sqlite3_free(error);
  sqlite3_close(db);
}

std::string error_name(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.name();
  }
  return "no error";
}

TEST(HistoryStore, CreatesSchemaWithWalVersionAndApplicationId) {
  const auto path = scratch("create") / "nested" / "history.db";
  HistoryStore store(path);
  EXPECT_EQ(store.schema_version(), kHistorySchemaVersion);
  EXPECT_EQ(store.size(), 0u);
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &st, nullptr);
  ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
  EXPECT_STREQ(reinterpret_cast<const char*>(sqlite3_column_text(st, 0)), "wal");
  sqlite3_finalize(st);
  sqlite3_prepare_v2(db, "PRAGMA application_id", -1, &st, nullptr);
  ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
  EXPECT_EQ(sqlite3_column_int(st, 0), kHistoryApplicationId);
  sqlite3_finalize(st);
  sqlite3_close(db);
  // Reopening an existing history works and keeps the version.
  HistoryStore again(path);
  EXPECT_EQ(again.schema_version(), kHistorySchemaVersion);
}

TEST(HistoryStore, InsertListDocumentCsvAndPrune) {
  const auto path = scratch("basic") / "h.db";
  HistoryStore store(path);
  store.insert(make_run("aaa111", 100, 2 * kSec));
  auto second = make_run("aab222", 200, 3 * kSec);
  second.labels["branch"] = "perf";
  second.pipeline.name = "wan";
  second.gpus.clear();  // a CPU-only run: empty GPU column, not NULL
  store.insert(second);
  store.insert(make_run("aaa111", 100, 4 * kSec));  // same id replaces
  EXPECT_EQ(store.size(), 2u);
  const auto all = store.list();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].run_id, "aab222");  // newest first
  const auto& first = all[1];
  EXPECT_EQ(first.total_ns, 3 * kSec / 4 + 4 * kSec);
  EXPECT_EQ(first.pipeline, "sdxl");
  EXPECT_EQ(first.gpu, "NVIDIA H200");
  EXPECT_EQ(first.host, "node1");
  EXPECT_DOUBLE_EQ(first.peak_gpu_bytes, 13e9);
  EXPECT_DOUBLE_EQ(first.peak_rss_bytes, 2e9 + 3);
  EXPECT_DOUBLE_EQ(first.score, 87.5);
  EXPECT_EQ(first.params_hash.size(), 16u);
  EXPECT_EQ(store.list({"wan", {}, 0}).size(), 1u);
  EXPECT_EQ(store.list({"", {{"branch", "perf"}}, 0}).at(0).run_id, "aab222");
  EXPECT_EQ(store.list({"", {}, 1}).size(), 1u);
  // Documents by id and unique prefix.
  const auto doc = store.document("aab");
  ASSERT_TRUE(doc.has_value());
  EXPECT_EQ((*doc)["id"], "aab222");
  EXPECT_FALSE(store.document("zzz").has_value());
  EXPECT_EQ(error_name([&] { store.document("aa"); }), "AmbiguousRunId");
  // Observations: one per step and one for the whole run.
  const auto obs = store.observations("sdxl");
  EXPECT_EQ(obs.size(), 5u);
  const std::string csv = store.export_csv();
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 3);
  EXPECT_NE(csv.find("aab222,2026-11-21T12:00:00Z,wan,"), std::string::npos);
  EXPECT_EQ(store.prune(150 * kSec), 1u);
  EXPECT_EQ(store.size(), 1u);
  EXPECT_TRUE(store.observations("sdxl").empty());  // steps cascade with their run
  store.check();
}

TEST(HistoryStore, RegressionsFromStoredRuns) {
  const auto path = scratch("regress") / "h.db";
  HistoryStore store(path);
  std::mt19937_64 rng(3);
  std::normal_distribution<double> jitter(1.0, 0.02);
  for (int i = 0; i < 20; ++i)
    store.insert(make_run("r" + std::to_string(i), 1000 + i,
                          static_cast<std::int64_t>(4e9 * jitter(rng))));
  store.insert(make_run("slow", 2000, static_cast<std::int64_t>(5e9)));
  const auto obs = store.observations();
  bool sampling_regressed = false, load_regressed = false;
  for (const auto& f : find_regressions(obs)) {
    if (f.step == "sampling") sampling_regressed = f.regression;
    if (f.step == "load") load_regressed = f.regression;
  }
  EXPECT_TRUE(sampling_regressed);
  EXPECT_FALSE(load_regressed);
}

TEST(HistoryStore, MigratesFromVersionOneWithBackfill) {
  const auto path = scratch("migrate") / "h.db";
  { HistoryStore v1(path, 1); EXPECT_EQ(v1.schema_version(), 1); }
  sql(path,
      "INSERT INTO runs (run_id, start_unix_ns, start_utc, pipeline, model, architecture, host, "
      "gpu, params_hash, total_ns, document) VALUES ('old', 1, 'x', 'p', 'm', 'UNet', 'h', 'g', "
      "'0', 5, '{\"id\":\"old\",\"labels\":{\"team\":\"vision\"}}')");
  HistoryStore store(path);
  EXPECT_EQ(store.schema_version(), 2);
  const auto found = store.list({"", {{"team", "vision"}}, 0});
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].run_id, "old");
}

TEST(HistoryStore, RefusesNewerSchema) {
  const auto path = scratch("newer") / "h.db";
  { HistoryStore store(path); }
  sql(path, "PRAGMA user_version = 99");
  EXPECT_EQ(error_name([&] { HistoryStore s(path); }), "HistoryTooNew");
}

TEST(HistoryStore, ForeignFilesAreRejectedAndUntouched) {
  const auto dir = scratch("foreign");
  const auto text = dir / "notes.txt";
  std::ofstream(text) << "this is not a database, but it is long enough to look like one......";
  const std::string before = read_bytes(text);
  EXPECT_EQ(error_name([&] { HistoryStore s(text); }), "NotAHistoryDatabase");
  EXPECT_EQ(read_bytes(text), before);

  const auto other = dir / "other.sqlite";
  sql(other, "CREATE TABLE photos (id INTEGER PRIMARY KEY, path TEXT); "
             "INSERT INTO photos (path) VALUES ('a.jpg')");
  const std::string other_before = read_bytes(other);
  EXPECT_EQ(error_name([&] { HistoryStore s(other); }), "NotAHistoryDatabase");
  EXPECT_EQ(read_bytes(other), other_before);
  EXPECT_FALSE(fs::exists(dir / "other.sqlite-wal"));

  const auto app = dir / "app.sqlite";
  sql(app, "PRAGMA application_id = 1234");
  EXPECT_EQ(error_name([&] { HistoryStore s(app); }), "NotAHistoryDatabase");
}

TEST(HistoryStore, CorruptDatabaseIsReportedAndUntouched) {
  const auto dir = scratch("corrupt");
  const auto path = dir / "h.db";
  {
    HistoryStore store(path);
    for (int i = 0; i < 20; ++i) store.insert(make_run("c" + std::to_string(i), i, kSec, 200));
  }
  ASSERT_FALSE(fs::exists(dir / "h.db-wal"));  // checkpointed on close
  std::string bytes = read_bytes(path);
  // Wreck the schema page (page 1 after the 100-byte header).
  for (std::size_t i = 100; i < 4096 && i < bytes.size(); ++i) bytes[i] = static_cast<char>(0xA5);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  EXPECT_EQ(error_name([&] { HistoryStore s(path); }), "HistoryCorrupt");
  EXPECT_EQ(read_bytes(path), bytes);

  // Damage inside a data page: integrity_check reports it.
  const auto deep = dir / "deep.db";
  {
    HistoryStore store(deep);
    for (int i = 0; i < 20; ++i) store.insert(make_run("d" + std::to_string(i), i, kSec, 200));
  }
  std::string deep_bytes = read_bytes(deep);
  ASSERT_GT(deep_bytes.size(), 12 * 4096u);
  for (std::size_t i = 8 * 4096; i < 8 * 4096 + 4096; ++i) deep_bytes[i] = static_cast<char>(0x5A);
  std::ofstream(deep, std::ios::binary | std::ios::trunc) << deep_bytes;
  const std::string name = error_name([&] {
    HistoryStore s(deep);
    s.check();
  });
  EXPECT_EQ(name, "HistoryCorrupt");
}

TEST(HistoryStore, ConcurrentWriterProcessesAllSucceed) {
  const auto path = scratch("concurrent") / "h.db";
  constexpr int kProcesses = 4, kRunsEach = 25;
  std::vector<pid_t> children;
  for (int p = 0; p < kProcesses; ++p) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      int code = 0;
      try {
        HistoryStore store(path);  // concurrent creation and migration too
        for (int i = 0; i < kRunsEach; ++i)
          store.insert(make_run("p" + std::to_string(p) + "_" + std::to_string(i), i, kSec, 500));
      } catch (const std::exception& e) {
        std::fprintf(stderr, "writer %d: %s\n", p, e.what());
        code = 1;
      }
      _exit(code);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  HistoryStore store(path);
  EXPECT_EQ(store.size(), static_cast<std::size_t>(kProcesses * kRunsEach));
  store.check();
}

TEST(HistoryStore, SigkillMidWriteKeepsCommittedRuns) {
  const auto path = scratch("sigkill") / "h.db";
  std::set<std::string> committed;
  for (int round = 0; round < 3; ++round) {
    int fds[2];
    ASSERT_EQ(pipe(fds), 0);
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      close(fds[0]);
      try {
        HistoryStore store(path);
        for (int i = 0;; ++i) {
          const std::string id = "k" + std::to_string(round) + "_" + std::to_string(i);
          // Large documents keep the process inside transactions most of the time.
          store.insert(make_run(id, i, kSec, 20000));
          const std::string line = id + "\n";
          if (write(fds[1], line.data(), line.size()) < 0) _exit(2);
        }
      } catch (...) {
        _exit(1);
      }
    }
    close(fds[1]);
    FILE* in = fdopen(fds[0], "r");
    char line[128];
    const int wanted = 5 + round * 3;
    for (int n = 0; n < wanted && std::fgets(line, sizeof line, in) != nullptr; ++n) {
      std::string id(line);
      id.pop_back();
      committed.insert(id);
    }
    usleep(static_cast<useconds_t>(1000 * (round + 1)));  // land somewhere in a write
    kill(pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFSIGNALED(status));
    // Ids reported after our last read were committed too.
    while (std::fgets(line, sizeof line, in) != nullptr) {
      std::string id(line);
      if (!id.empty() && id.back() == '\n') {
        id.pop_back();
        committed.insert(id);
      }
    }
    fclose(in);
  }
  HistoryStore store(path);
  store.check();
  std::set<std::string> stored;
  for (const auto& r : store.list()) stored.insert(r.run_id);
  for (const auto& id : committed) EXPECT_TRUE(stored.count(id)) << id;
  for (const auto& id : committed) {
    const auto doc = store.document(id);
    ASSERT_TRUE(doc.has_value());
    EXPECT_EQ((*doc)["series"]["offset_ns"].size(), 20000u);
  }
}

TEST(HistoryStore, DefaultPathFollowsXdg) {
  const char* old = std::getenv("XDG_DATA_HOME");
  const std::string saved = old ? old : "";
  setenv("XDG_DATA_HOME", "/data/x", 1);
  EXPECT_EQ(default_history_path(), fs::path("/data/x/genscope/history.db"));
  unsetenv("XDG_DATA_HOME");
  EXPECT_NE(default_history_path().string().find(".local/share/genscope/history.db"),
            std::string::npos);
  if (old) setenv("XDG_DATA_HOME", saved.c_str(), 1);
}

}  // namespace
}  // namespace genscope
