// Tests of the process-tree probe (genscope/process_tree.hpp) and the memory cgroup on real
// child processes (tests/children/test_child.cpp): discovery of descendants, exact per-step
// peaks from each process's VmHWM, the cgroup's exact tree peak, lifetime peaks across
// resets, --no-peak-reset, and the per-step "figure_parts" attachments.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <optional>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "genscope/error.hpp"
#include "genscope/memory_cgroup.hpp"
#include "genscope/monitor.hpp"
#include "genscope/process_tree.hpp"
#include "probes/cgroup_paths.hpp"
#include "probes/proc_file.hpp"

namespace genscope {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

// The test child in "serve" mode, driven line by line through its stdin.
class ServedChild {
 public:
  explicit ServedChild(const std::filesystem::path& cgroup = {}) {
    int in[2], out[2];
    if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0) throw std::runtime_error("pipe");
    const std::string procs = cgroup.empty() ? "" : (cgroup / "cgroup.procs").string();
    const int procs_fd = procs.empty() ? -1 : ::open(procs.c_str(), O_WRONLY | O_CLOEXEC);
    pid_ = ::fork();
    if (pid_ == 0) {
      if (procs_fd >= 0 && ::write(procs_fd, "0", 1) != 1) ::_exit(120);
      ::dup2(in[0], 0);
      ::dup2(out[1], 1);
      ::execl(GENSCOPE_TEST_CHILD, GENSCOPE_TEST_CHILD, "serve", nullptr);
      ::_exit(127);
    }
    if (procs_fd >= 0) ::close(procs_fd);
    ::close(in[0]);
    ::close(out[1]);
    to_ = in[1];
    from_ = out[0];
  }
  ~ServedChild() {
    if (to_ >= 0) ::close(to_);  // EOF ends serve()
    if (from_ >= 0) ::close(from_);
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  int pid() const { return pid_; }
  // Sends one command and waits for its "done" (10 s at most).
  void command(const std::string& line) {
    const std::string text = line + "\n";
    ASSERT_EQ(::write(to_, text.data(), text.size()), static_cast<ssize_t>(text.size()));
    std::string got;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (got.find("done\n") == std::string::npos) {
      pollfd p{from_, POLLIN, 0};
      ASSERT_GT(::poll(&p, 1, 10000), 0) << "no answer to " << line;
      char c;
      ASSERT_EQ(::read(from_, &c, 1), 1);
      got += c;
      ASSERT_LT(std::chrono::steady_clock::now(), deadline);
    }
  }
  // Ends the child (exit code) and reaps it; returns the wait status.
  int finish(int code) {
    const std::string text = "exit " + std::to_string(code) + "\n";
    EXPECT_EQ(::write(to_, text.data(), text.size()), static_cast<ssize_t>(text.size()));
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    return status;
  }

 private:
  pid_t pid_ = -1;
  int to_ = -1, from_ = -1;
};

MonitorOptions tree_only() {
  MonitorOptions o;
  o.process_probe = false;
  o.system_probe = false;
  o.nvml_probe = false;
  o.sample_interval = std::chrono::milliseconds(5);
  o.max_sample_interval = o.sample_interval;  // a fixed cadence
  return o;
}

const Attachment* parts_of(const StepRecord& step, const std::string& metric) {
  for (const Attachment& a : step.attachments) {
    if (a.type == "figure_parts" && a.name == metric) return &a;
  }
  return nullptr;
}

// The part of process `pid` in a step's figure_parts, or null json.
nlohmann::json part_of(const StepRecord& step, int pid) {
  const Attachment* a = parts_of(step, "tree.rss_bytes");
  if (a == nullptr) return nullptr;
  for (const auto& p : a->data["parts"]) {
    if (p["pid"] == pid) return p;
  }
  return nullptr;
}

double vmhwm_bytes(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stod(line.substr(6)) * 1024.0;
  }
  return kNaN;
}

bool clear_refs_works() {
  std::ofstream out("/proc/self/clear_refs");
  out << "5";
  out.flush();
  return out.good();
}

TEST(CgroupPaths, OwnCgroupAndMountFromProcFiles) {
  const char* cgroups = "9:name=systemd:/\n4:cpu,memory:/process_api/abc\n0::/user.slice/x\n";
  EXPECT_EQ(detail::parse_own_cgroup(cgroups, 1), "/process_api/abc");
  EXPECT_EQ(detail::parse_own_cgroup(cgroups, 2), "/user.slice/x");
  EXPECT_EQ(detail::parse_own_cgroup("4:memoryx:/a\n", 1), std::nullopt);
  EXPECT_EQ(detail::parse_own_cgroup("garbage\n4:memory\n", 1), std::nullopt);
  const char* mounts =
      "30 25 0:26 / /sys/fs/cgroup/cpu rw,relatime shared:10 - cgroup cgroup rw,cpu\n"
      "33 25 0:29 / /sys/fs/cgroup/memory rw,relatime shared:13 - cgroup cgroup rw,memory\n"
      "40 25 0:35 /sub /sys/fs/cgroup/uni\\040fied rw - cgroup2 cgroup2 rw\n";
  const auto v1 = detail::parse_cgroup_mount(mounts, 1);
  ASSERT_TRUE(v1.has_value());
  EXPECT_EQ(v1->mount_point, "/sys/fs/cgroup/memory");
  EXPECT_EQ(detail::cgroup_directory(*v1, "/process_api/abc"),
            "/sys/fs/cgroup/memory/process_api/abc");
  const auto v2 = detail::parse_cgroup_mount(mounts, 2);
  ASSERT_TRUE(v2.has_value());
  EXPECT_EQ(v2->mount_point, "/sys/fs/cgroup/uni fied");
  EXPECT_EQ(detail::cgroup_directory(*v2, "/sub/x"), "/sys/fs/cgroup/uni fied/x");
  EXPECT_EQ(detail::cgroup_directory(*v2, "/other"), std::nullopt);   // outside the mount
  EXPECT_EQ(detail::cgroup_directory(*v1, "/a/../../etc"), std::nullopt);
  // A mount point with a ".." component (malformed mountinfo; found by proc_parse_fuzz).
  EXPECT_EQ(detail::cgroup_directory(detail::CgroupMount{"/", "/sys/fs/../x"}, "/a"), std::nullopt);
  EXPECT_EQ(detail::parse_cgroup_mount("1 2 3:4 / /x rw - cgroup\n", 1), std::nullopt);  // cut
}

TEST(ProcParse, StatFieldsAndPidLists) {
  const auto stat = detail::parse_proc_stat(
      "4242 (a) (b) c) S 17 4242 4242 0 -1 4194560 100 0 0 0 5 3 0 0 20 0 1 0 123456 1000 1\n");
  ASSERT_TRUE(stat.has_value());
  EXPECT_EQ(stat->comm, "a) (b) c");
  EXPECT_EQ(stat->state, 'S');
  EXPECT_EQ(stat->ppid, 17u);
  EXPECT_EQ(stat->start_ticks, 123456u);
  EXPECT_EQ(detail::parse_proc_stat("7 (x) R 1 7"), std::nullopt);
  EXPECT_EQ(detail::parse_proc_stat("7 x R 1"), std::nullopt);
  std::vector<int> pids;
  EXPECT_TRUE(detail::for_each_pid("12 13\n14\n", [&](int p) { pids.push_back(p); }));
  EXPECT_EQ(pids, (std::vector<int>{12, 13, 14}));
  EXPECT_FALSE(detail::for_each_pid("12 -3", [](int) {}));
  EXPECT_FALSE(detail::for_each_pid("0", [](int) {}));
  EXPECT_FALSE(detail::for_each_pid("99999999999", [](int) {}));
  EXPECT_FALSE(detail::for_each_pid("12x", [](int) {}));
}

TEST(ProcessTree, ProbeColumnsAndRootNotFound) {
  ProcessTree tree({.root_pid = 0});
  auto probe = tree.make_probe();
  ASSERT_EQ(probe->metrics().size(), 2u);
  EXPECT_EQ(probe->metrics()[0].name, "tree.rss_bytes");
  EXPECT_TRUE(probe->metrics()[0].exact_peak);
  EXPECT_EQ(probe->metrics()[1].name, "tree.processes");
  EXPECT_TRUE(probe->has_parts());
  EXPECT_EQ(probe->open().error, "process tree: no root process");
  ProcessTree gone({.root_pid = 0x7ffffff0});
  EXPECT_NE(gone.make_probe()->open().error.find("not found"), std::string::npos);
  ProcessTree no_reset({.root_pid = 1, .reset_peaks = false});
  EXPECT_FALSE(no_reset.make_probe()->metrics()[0].exact_peak);
}

TEST(ProcessTree, FollowsDescendantsAsTheyComeAndGo) {
  ServedChild child;
  auto tree = std::make_shared<ProcessTree>(ProcessTreeOptions{.root_pid = child.pid()});
  auto probe = tree->make_probe();
  ASSERT_TRUE(probe->open().ok());
  double row[2];
  ASSERT_TRUE(probe->sample(row).ok());
  EXPECT_EQ(row[1], 1);
  EXPECT_GT(row[0], 0);
  // A child and a grandchild (alive 1.5 s after its spike).
  child.command("grandchild 8 1 1500");
  ASSERT_TRUE(probe->sample(row).ok());
  EXPECT_EQ(row[1], 3) << "child + its child + grandchild";
  int descendants = 0;
  for (int pid = 1; pid < 4 * 1024 * 1024; ++pid) {
    if (pid != child.pid() && tree->contains(pid)) ++descendants;
    if (descendants == 2) break;
  }
  EXPECT_EQ(descendants, 2);
  // They exit: the tree shrinks back to the root.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  do {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ASSERT_TRUE(probe->sample(row).ok());
  } while (row[1] != 1 && std::chrono::steady_clock::now() < deadline);
  EXPECT_EQ(row[1], 1);
  EXPECT_EQ(child.finish(0), 0);
}

TEST(ProcessTree, SingleProcessStepHasTheExactPeakOfASpikeBetweenSamples) {
  if (!clear_refs_works()) GTEST_SKIP() << "clear_refs refused here";
  ServedChild child;
  auto tree = std::make_shared<ProcessTree>(ProcessTreeOptions{.root_pid = child.pid()});
  MonitorOptions o = tree_only();
  o.sampler = false;  // no samples at all: only the kernel's high-water mark can see it
  Monitor monitor(o);
  monitor.add_probe(tree->make_probe());
  ActiveRun run = monitor.start_run();
  {
    Step step = run.step(StepKind::kSampling, "spike");
    child.command("spike 64 2");
  }
  genscope::Run r = run.finish();
  ASSERT_EQ(r.monitoring_errors.size(), 0u) << r.monitoring_errors[0].message;
  const MetricFigures* m = r.steps[0].metric("tree.rss_bytes");
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->peak_source, "exact");
  EXPECT_GE(m->peak - m->before, 63 * kMiB);
  EXPECT_LT(m->after - m->before, 8 * kMiB);
  const nlohmann::json part = part_of(r.steps[0], child.pid());
  ASSERT_FALSE(part.is_null());
  EXPECT_EQ(part["peak_source"], "exact");
  EXPECT_NEAR(part["peak"].get<double>(), m->peak, 1.0);
  EXPECT_NE(part["command"].get<std::string>().find("serve"), std::string::npos);
  child.finish(0);
}

TEST(ProcessTree, GrandchildSpikeIsInTheRightStepOnly) {
  if (!clear_refs_works()) GTEST_SKIP() << "clear_refs refused here";
  ServedChild child;
  auto tree = std::make_shared<ProcessTree>(ProcessTreeOptions{.root_pid = child.pid()});
  Monitor monitor(tree_only());
  monitor.add_probe(tree->make_probe());
  ActiveRun run = monitor.start_run();
  {
    Step a = run.step(StepKind::kCustom, "before");
    child.command("alloc 1");
  }
  {
    Step b = run.step(StepKind::kCustom, "spike");
    // 64 MiB held 3 ms: shorter than the sampling interval can promise to see.
    child.command("grandchild 64 3 800");
  }
  {
    Step c = run.step(StepKind::kCustom, "after");
    child.command("free");
  }
  genscope::Run r = run.finish();
  const StepRecord& spike = *r.step("spike");
  const Attachment* parts = parts_of(spike, "tree.rss_bytes");
  ASSERT_NE(parts, nullptr);
  double grandchild_peak = 0;
  int exact_big = 0;
  for (const auto& p : parts->data["parts"]) {
    if (p["pid"] == child.pid()) continue;
    grandchild_peak = std::max(grandchild_peak, p["peak"].get<double>());
    if (p["peak"].get<double>() >= 64 * kMiB) exact_big += p["peak_source"] == "exact";
  }
  EXPECT_GE(grandchild_peak, 64 * kMiB);
  EXPECT_EQ(exact_big, 1) << parts->data.dump();
  // Several processes in the step: the tree sum's peak is sampled, not claimed exact.
  EXPECT_EQ(spike.metric("tree.rss_bytes")->peak_source, "sampled");
  for (const char* name : {"before", "after"}) {
    const Attachment* other = parts_of(*r.step(name), "tree.rss_bytes");
    ASSERT_NE(other, nullptr);
    for (const auto& p : other->data["parts"]) EXPECT_LT(p["peak"].get<double>(), 32 * kMiB) << name;
  }
  child.finish(0);
}

TEST(ProcessTree, LifetimePeakSurvivesTheResetsThatLowerVmHWM) {
  if (!clear_refs_works()) GTEST_SKIP() << "clear_refs refused here";
  ServedChild child;
  auto tree = std::make_shared<ProcessTree>(ProcessTreeOptions{.root_pid = child.pid()});
  Monitor monitor(tree_only());
  monitor.add_probe(tree->make_probe());
  ActiveRun run = monitor.start_run();
  {
    Step s = run.step(StepKind::kCustom, "big");
    child.command("spike 96 1");
  }
  { Step s = run.step(StepKind::kCustom, "small"); }
  genscope::Run r = run.finish();
  // The reset at "small" lowered the kernel's VmHWM (what getrusage/time -v read) ...
  EXPECT_LT(vmhwm_bytes(child.pid()), 64 * kMiB);
  // ... but the lifetime peak genscope tracked across it keeps the 96 MiB.
  const Attachment summary = tree->take_summary();
  ASSERT_EQ(summary.type, "process_tree");
  const auto& p = summary.data["processes"][0];
  EXPECT_EQ(p["pid"], child.pid());
  EXPECT_GE(p["lifetime_peak_bytes"].get<double>(), 96 * kMiB);
  EXPECT_EQ(p["lifetime_peak_source"], "exact");
  EXPECT_GE(summary.data["sum_of_lifetime_peaks_bytes"].get<double>(), 96 * kMiB);
  child.finish(0);
}

TEST(ProcessTree, NoPeakResetLeavesVmHWMAloneAndSamplesPeaks) {
  ServedChild child;
  auto tree = std::make_shared<ProcessTree>(
      ProcessTreeOptions{.root_pid = child.pid(), .reset_peaks = false});
  Monitor monitor(tree_only());
  monitor.add_probe(tree->make_probe());
  ActiveRun run = monitor.start_run();
  {
    Step s = run.step(StepKind::kCustom, "big");
    child.command("spike 96 1");
  }
  { Step s = run.step(StepKind::kCustom, "small"); }
  genscope::Run r = run.finish();
  EXPECT_GE(vmhwm_bytes(child.pid()), 96 * kMiB);  // untouched
  EXPECT_NE(r.steps[0].metric("tree.rss_bytes")->peak_source, "exact");
  const nlohmann::json part = part_of(r.steps[0], child.pid());
  ASSERT_FALSE(part.is_null());
  EXPECT_EQ(part["peak_source"], "sampled");
  // The lifetime peak is VmHWM itself then.
  const Attachment summary = tree->take_summary();
  EXPECT_GE(summary.data["processes"][0]["lifetime_peak_bytes"].get<double>(), 96 * kMiB);
  bool noted = false;
  for (const std::string& n : tree->notes()) noted = noted || n.find("--no-peak-reset") != n.npos;
  EXPECT_TRUE(noted);
  child.finish(0);
}

TEST(ProcessTree, ReapedChildLifetimeUsesRusage) {
  ServedChild child;
  auto tree = std::make_shared<ProcessTree>(ProcessTreeOptions{.root_pid = child.pid()});
  auto probe = tree->make_probe();
  ASSERT_TRUE(probe->open().ok());
  double row[2];
  ASSERT_TRUE(probe->sample(row).ok());
  const int pid = child.pid();
  child.finish(0);
  tree->process_exited(pid, 123 * kMiB);
  const Attachment summary = tree->take_summary();
  const auto& p = summary.data["processes"][0];
  EXPECT_TRUE(p["exited"].get<bool>());
  EXPECT_EQ(p["rusage_maxrss_bytes"].get<double>(), 123 * kMiB);
  EXPECT_EQ(p["lifetime_peak_bytes"].get<double>(), 123 * kMiB);
  // Reported once: the next period has no process left.
  EXPECT_TRUE(tree->take_summary().data["processes"].empty());
}

class CgroupTree : public ::testing::Test {
 protected:
  void SetUp() override {
    try {
      cgroup_.emplace();
    } catch (const Error& e) {
      GTEST_SKIP() << e.name() << ": " << e.what();
    }
  }
  std::optional<MemoryCgroup> cgroup_;
};

TEST_F(CgroupTree, ExactTreePeakIncludesAGrandchildThatAlreadyExited) {
  ServedChild child(cgroup_->path());
  auto tree = std::make_shared<ProcessTree>(ProcessTreeOptions{
      .root_pid = child.pid(), .cgroup = cgroup_->path(), .cgroup_version = cgroup_->version()});
  auto probe = tree->make_probe();
  ASSERT_EQ(probe->metrics().size(), 3u);
  EXPECT_EQ(probe->metrics()[2].name, "cgroup.usage_bytes");
  Monitor monitor(tree_only());
  monitor.add_probe(std::move(probe));
  ActiveRun run = monitor.start_run();
  {
    Step s = run.step(StepKind::kCustom, "spike");
    child.command("grandchild 64 3 0");  // gone right after its spike
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  genscope::Run r = run.finish();
  const MetricFigures* m = r.steps[0].metric("cgroup.usage_bytes");
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->peak_source, "exact");
  EXPECT_GE(m->peak - m->before, 64 * kMiB);
  child.finish(0);
}

TEST_F(CgroupTree, SingleProcessPeakMatchesTheCgroupWithinAFewPages) {
  if (!clear_refs_works()) GTEST_SKIP() << "clear_refs refused here";
  ServedChild child(cgroup_->path());
  auto tree = std::make_shared<ProcessTree>(ProcessTreeOptions{
      .root_pid = child.pid(), .cgroup = cgroup_->path(), .cgroup_version = cgroup_->version()});
  // Warm-up: the code of the command loop is faulted in now, not inside the step (file pages
  // already in the page cache count in RSS but are charged to whoever read them first).
  child.command("spike 1 1");
  Monitor monitor(tree_only());
  monitor.add_probe(tree->make_probe());
  ActiveRun run = monitor.start_run();
  {
    Step s = run.step(StepKind::kCustom, "spike");
    child.command("spike 64 2");
  }
  genscope::Run r = run.finish();
  const MetricFigures* tree_rss = r.steps[0].metric("tree.rss_bytes");
  const MetricFigures* cgroup = r.steps[0].metric("cgroup.usage_bytes");
  ASSERT_EQ(tree_rss->peak_source, "exact");
  ASSERT_EQ(cgroup->peak_source, "exact");
  const double tree_rise = tree_rss->peak - tree_rss->before;
  const double cgroup_rise = cgroup->peak - cgroup->before;
  // The cgroup also charges the page tables of the 64 MiB (128 KiB) and charges in per-CPU
  // batches of 64 pages (per CPU): a few dozen pages apart, within 2 x 64 pages.
  std::printf("64 MiB spike: tree +%.0f KiB, cgroup +%.0f KiB (difference %+.0f KiB)\n",
              tree_rise / 1024, cgroup_rise / 1024, (cgroup_rise - tree_rise) / 1024);
  EXPECT_NEAR(cgroup_rise, tree_rise, 512 * 1024.0)
      << "tree +" << tree_rise / kMiB << " MiB, cgroup +" << cgroup_rise / kMiB << " MiB";
  const Attachment summary = tree->take_summary();
  EXPECT_GE(summary.data["cgroup"]["lifetime_peak_bytes"].get<double>(), 64 * kMiB);
  child.finish(0);
}

TEST_F(CgroupTree, RemovedAtTheEndEvenWithAProcessLeftInside) {
  const std::filesystem::path path = cgroup_->path();
  ServedChild child(path);
  child.command("free");  // it answers: it has joined the cgroup and exec'd
  std::ifstream procs(path / "cgroup.procs");
  std::string first;
  procs >> first;
  EXPECT_EQ(first, std::to_string(child.pid()));
  EXPECT_EQ(cgroup_->remove(), "");  // the child still runs: it goes back to the parent
  EXPECT_FALSE(std::filesystem::exists(path));
  child.finish(0);
}

}  // namespace
}  // namespace genscope
