// Tests of write_run_file_or_fallback: a finished run's document survives a folder that cannot
// be written (a path under a file, a folder in the way, sysfs), a full disk (RLIMIT_FSIZE, and a
// real full tmpfs where this machine lets a test mount one), down to the last-resort stream.
// Permission bits do not stop root, so every failure here is one root gets too.
#include <errno.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>

#include "genscope/genscope.hpp"

namespace genscope {
namespace {

namespace fs = std::filesystem;

fs::path scratch(const std::string& name) {
  const char* base = std::getenv("GENSCOPE_TEST_TMP");
  const fs::path dir = fs::path(base ? base : "/tmp") / "run_file_fallback_test" /
                       (name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

Run sample_run(std::size_t samples = 10) {
  Run r;
  r.id = "fedcba9876543210fedcba9876543210";
  r.start_utc = "2026-11-21T12:00:00.000Z";
  r.duration_ns = 1'000'000'000;
  r.genscope_version = "0.1.0";
  StepRecord s;
  s.name = "sampling";
  s.kind = StepKind::kSampling;
  s.status = StepStatus::kOk;
  s.duration_ns = 900'000'000;
  s.metrics.push_back({"process.rss_bytes", Unit::kBytes, 1e8, 2e8, 3e8, -1, "exact"});
  r.steps.push_back(s);
  r.series.metrics = {"process.rss_bytes"};
  r.series.units = {Unit::kBytes};
  for (std::size_t i = 0; i < samples; ++i) {
    r.series.offset_ns.push_back(static_cast<std::int64_t>(i) * 1'000'000);
    r.series.values.push_back(1e8 + static_cast<double>(i));
  }
  return r;
}

// A path that cannot be created by anyone, root included: its folder is a regular file.
fs::path under_a_file(const fs::path& dir) {
  std::ofstream(dir / "a-file") << "x";
  return dir / "a-file" / "sub";
}

class RunFileFallback : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* name : {"XDG_STATE_HOME", "HOME", "TMPDIR"}) {
      const char* v = std::getenv(name);
      saved_.emplace_back(name, v ? std::optional<std::string>(v) : std::nullopt);
    }
  }
  void TearDown() override {
    for (const auto& [name, value] : saved_) {
      if (value) {
        ::setenv(name.c_str(), value->c_str(), 1);
      } else {
        ::unsetenv(name.c_str());
      }
    }
  }
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

TEST_F(RunFileFallback, WritesTheRequestedPathWhenItCan) {
  const fs::path dir = scratch("ok");
  const RunFileOutcome o = write_run_file_or_fallback(sample_run(), dir / "run.json");
  EXPECT_TRUE(o.ok());
  EXPECT_TRUE(o.failures.empty());
  EXPECT_EQ(read_run_file(dir / "run.json").id, sample_run().id);
}

TEST_F(RunFileFallback, FolderThatCannotExistFallsBackToTheStateFolder) {
  const fs::path dir = scratch("state");
  ::setenv("XDG_STATE_HOME", (dir / "state").c_str(), 1);
  ::setenv("TMPDIR", (dir / "tmp").c_str(), 1);
  const fs::path wanted = under_a_file(dir) / "run.json";
  const RunFileOutcome o = write_run_file_or_fallback(sample_run(), wanted);
  EXPECT_FALSE(o.ok());
  EXPECT_TRUE(o.saved());
  const fs::path expected = dir / "state" / "genscope" / "runs" / (sample_run().id + ".json");
  EXPECT_EQ(o.path, expected);
  ASSERT_EQ(o.failures.size(), 1u);
  EXPECT_EQ(o.failures[0].path, wanted);
  EXPECT_EQ(o.failures[0].error_name, "WriteFailed");
  EXPECT_NE(o.failures[0].message.find(std::strerror(ENOTDIR)), std::string::npos)
      << o.failures[0].message;
  const genscope::Run back = read_run_file(expected);
  EXPECT_EQ(to_json(back), to_json(sample_run()));
}

TEST_F(RunFileFallback, FolderInTheWayAndNoStateFolderFallsBackToTmpdir) {
  const fs::path dir = scratch("tmpdir");
  fs::create_directories(dir / "out" / "run.json");  // rename(2) onto a folder: EISDIR
  ::setenv("XDG_STATE_HOME", under_a_file(dir).c_str(), 1);
  ::setenv("TMPDIR", (dir / "tmp").c_str(), 1);
  fs::create_directories(dir / "tmp");
  const RunFileOutcome o = write_run_file_or_fallback(sample_run(), dir / "out" / "run.json");
  EXPECT_EQ(o.path, dir / "tmp" / ("genscope-run-" + sample_run().id + ".json"));
  ASSERT_EQ(o.failures.size(), 2u);
  EXPECT_NE(o.failures[0].message.find(std::strerror(EISDIR)), std::string::npos)
      << o.failures[0].message;
  EXPECT_NE(o.failures[1].message.find("cannot create the folder"), std::string::npos)
      << o.failures[1].message;
  EXPECT_EQ(read_run_file(o.path).id, sample_run().id);
  // No temporary file is left behind by the failed attempt.
  for (const auto& e : fs::directory_iterator(dir / "out")) {
    EXPECT_EQ(e.path().filename(), "run.json") << e.path();
  }
}

TEST_F(RunFileFallback, ReadOnlyFileSystemFallsBack) {
  // sysfs takes no new files from anyone; in containers it is also mounted read-only.
  const fs::path dir = scratch("sysfs");
  ::setenv("XDG_STATE_HOME", (dir / "state").c_str(), 1);
  const RunFileOutcome o = write_run_file_or_fallback(sample_run(), "/sys/genscope-run.json");
  ASSERT_FALSE(o.failures.empty());
  EXPECT_EQ(o.failures[0].path, "/sys/genscope-run.json");
  EXPECT_NE(o.failures[0].message.find("/sys/genscope-run.json"), std::string::npos);
  EXPECT_EQ(o.path.parent_path(), dir / "state" / "genscope" / "runs");
}

TEST_F(RunFileFallback, EveryFileFailsThenTheStreamGetsTheDocument) {
  const fs::path dir = scratch("stream");
  ::setenv("XDG_STATE_HOME", under_a_file(dir).c_str(), 1);
  ::setenv("TMPDIR", (dir / "a-file" / "tmp").c_str(), 1);
  std::ostringstream last;
  const RunFileOutcome o =
      write_run_file_or_fallback(sample_run(), dir / "a-file" / "run.json", &last);
  EXPECT_TRUE(o.streamed);
  EXPECT_TRUE(o.path.empty());
  EXPECT_TRUE(o.saved());
  EXPECT_EQ(o.failures.size(), 3u);
  EXPECT_EQ(to_json(run_from_json(nlohmann::json::parse(last.str()))), to_json(sample_run()));
  // Without a stream nothing is saved, and the outcome says so.
  const RunFileOutcome none = write_run_file_or_fallback(sample_run(), dir / "a-file" / "run.json");
  EXPECT_FALSE(none.saved());
  EXPECT_EQ(none.failures.size(), 3u);
}

TEST_F(RunFileFallback, FallbackFoldersFollowXdgAndTmpdir) {
  ::setenv("XDG_STATE_HOME", "/state", 1);
  ::setenv("TMPDIR", "/scratch", 1);
  EXPECT_EQ(run_file_fallback_dirs(), (std::vector<fs::path>{"/state/genscope/runs", "/scratch"}));
  ::setenv("XDG_STATE_HOME", "relative/state", 1);  // invalid per the XDG spec: ignored
  ::setenv("HOME", "/home/u", 1);
  ::unsetenv("TMPDIR");
  EXPECT_EQ(run_file_fallback_dirs(),
            (std::vector<fs::path>{"/home/u/.local/state/genscope/runs", "/tmp"}));
}

TEST_F(RunFileFallback, InvalidUtf8IsWrittenAsReplacementNotLost) {
  const fs::path dir = scratch("utf8");
  genscope::Run r = sample_run();
  r.steps[0].name = "decode \xff\xfe";
  r.steps[0].attachments.push_back({"text", "prompt", {{"text", "caf\xc3"}}});
  write_run_file(r, dir / "run.json");
  const genscope::Run back = read_run_file(dir / "run.json");
  EXPECT_EQ(back.steps[0].name, "decode \xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_TRUE(write_run_file_or_fallback(r, dir / "again.json").ok());
}

// Runs `body` in a child process and returns its exit status (the child may change limits,
// signals and mounts without touching the test process).
int in_child(const std::function<int()>& body) {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(body());
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// The document is larger than the file-size limit: every file write fails with EFBIG, exactly
// as on a full disk, and the stream still gets the whole document.
TEST_F(RunFileFallback, FileSizeLimitActsAsAFullDiskForEveryLocation) {
  const fs::path dir = scratch("fsize");
  ::setenv("XDG_STATE_HOME", (dir / "state").c_str(), 1);
  ::setenv("TMPDIR", (dir / "tmp").c_str(), 1);
  fs::create_directories(dir / "tmp");
  const fs::path report = dir / "child-report.txt";
  const int rc = in_child([&] {
    std::signal(SIGXFSZ, SIG_IGN);  // write(2) then fails with EFBIG instead of killing us
    const rlimit limit{4096, 4096};
    if (::setrlimit(RLIMIT_FSIZE, &limit) != 0) return 10;
    std::ostringstream last;
    const RunFileOutcome o = write_run_file_or_fallback(sample_run(5000), dir / "run.json", &last);
    const rlimit unlimited{RLIM_INFINITY, RLIM_INFINITY};
    ::setrlimit(RLIMIT_FSIZE, &unlimited);
    std::ofstream out(report);
    for (const RunFileFailure& f : o.failures) out << f.message << "\n";
    if (!o.streamed || !o.path.empty() || o.failures.size() != 3) return 11;
    for (const RunFileFailure& f : o.failures) {
      if (f.message.find(std::strerror(EFBIG)) == std::string::npos) return 12;
    }
    if (run_from_json(nlohmann::json::parse(last.str())).series.size() != 5000) return 13;
    return 0;
  });
  std::ifstream in(report);
  std::stringstream messages;
  messages << in.rdbuf();
  EXPECT_EQ(rc, 0) << messages.str();
  EXPECT_FALSE(fs::exists(dir / "run.json"));  // nothing partial was left
}

// A real full file system: a 16 KiB tmpfs in a private mount namespace. Needs CAP_SYS_ADMIN
// (root outside a restricted container); skipped where mounting is not allowed.
TEST_F(RunFileFallback, FullTmpfsFallsBackToTheStateFolder) {
  const fs::path dir = scratch("tmpfs");
  fs::create_directories(dir / "full");
  fs::create_directories(dir / "state");
  ::setenv("XDG_STATE_HOME", (dir / "state").c_str(), 1);
  const fs::path report = dir / "child-report.txt";
  const int rc = in_child([&] {
    if (::unshare(CLONE_NEWNS) != 0) return 77;
    if (::mount("none", "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return 77;
    if (::mount("tmpfs", (dir / "full").c_str(), "tmpfs", 0, "size=16k") != 0) return 77;
    const RunFileOutcome o = write_run_file_or_fallback(sample_run(5000), dir / "full" / "run.json");
    std::ofstream out(report);
    for (const RunFileFailure& f : o.failures) out << f.message << "\n";
    out << "saved at " << o.path.string() << "\n";
    if (o.failures.size() != 1) return 11;
    if (o.failures[0].message.find(std::strerror(ENOSPC)) == std::string::npos) return 12;
    if (o.path.parent_path() != dir / "state" / "genscope" / "runs") return 13;
    if (fs::exists(dir / "full" / "run.json")) return 14;
    return 0;
  });
  if (rc == 77) GTEST_SKIP() << "mounting a tmpfs is not allowed here";
  std::ifstream in(report);
  std::stringstream messages;
  messages << in.rdbuf();
  EXPECT_EQ(rc, 0) << messages.str();
}

}  // namespace
}  // namespace genscope
