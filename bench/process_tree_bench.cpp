// Cost of sampling a process tree (genscope run / watch), per process per sample, next to the
// bare /proc reads that sampling needs, measured in the same run on the same processes:
//
//   BM_BareStatm/N      pread of /proc/<pid>/statm of N processes (fds kept open): the floor
//                       for the RSS sum
//   BM_BareWalk/N       the same, plus what finding new processes without a cgroup needs:
//                       readdir of /proc/<pid>/task and pread of each thread's children list
//   BM_TreeSample/N     ProcessTree's probe sample() over the tree (walk discovery)
//   BM_TreeSampleCgroup/N  the same with a memory cgroup (discovery reads cgroup.procs);
//                       skipped where no cgroup can be created
//
// The tree: one root with N-1 children, all asleep. Counters: ns_per_process (thread CPU time
// per call / N) and x_bare (per-call time / the matching bare reads' time in this run).
//
//   build/bench/process_tree_bench
#include <benchmark/benchmark.h>
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <ctime>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "genscope/error.hpp"
#include "genscope/memory_cgroup.hpp"
#include "genscope/process_tree.hpp"

namespace {

double thread_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) * 1e9 + double(ts.tv_nsec);
}

// A root and n-1 children, asleep until the tree is destroyed. With a cgroup, the root joins
// it before forking (children inherit it).
class SleepingTree {
 public:
  SleepingTree(int n, const std::string& cgroup_procs = {}) {
    int ready[2];
    if (::pipe(ready) != 0) std::abort();
    root_ = ::fork();
    if (root_ == 0) {
      if (!cgroup_procs.empty()) {
        const int fd = ::open(cgroup_procs.c_str(), O_WRONLY);
        if (fd < 0 || ::write(fd, "0", 1) != 1) ::_exit(3);
      }
      ::setpgid(0, 0);  // one process group: the destructor ends them all at once
      for (int i = 1; i < n; ++i) {
        if (::fork() == 0) {
          for (;;) ::pause();
        }
      }
      (void)!::write(ready[1], "x", 1);
      for (;;) ::pause();
    }
    char c;
    if (::read(ready[0], &c, 1) != 1) std::abort();
    ::close(ready[0]);
    ::close(ready[1]);
  }
  ~SleepingTree() {
    ::kill(-root_, SIGKILL);  // the root's process group: the root and its children
    ::kill(root_, SIGKILL);   // (in case it had not made its group yet)
    ::waitpid(root_, nullptr, 0);
  }
  int root() const { return root_; }
  // Every pid of the tree (root first), from the children list.
  std::vector<int> pids() const {
    std::vector<int> out{root_};
    char path[64];
    std::snprintf(path, sizeof path, "/proc/%d/task/%d/children", root_, root_);
    if (FILE* f = std::fopen(path, "r")) {
      int pid;
      while (std::fscanf(f, "%d", &pid) == 1) out.push_back(pid);
      std::fclose(f);
    }
    return out;
  }

 private:
  pid_t root_ = -1;
};

struct OpenFiles {
  std::vector<int> statm, children;
  std::vector<DIR*> tasks;
  std::vector<int> pids;
  explicit OpenFiles(const std::vector<int>& p) : pids(p) {
    char path[80];
    for (int pid : pids) {
      std::snprintf(path, sizeof path, "/proc/%d/statm", pid);
      statm.push_back(::open(path, O_RDONLY | O_CLOEXEC));
      std::snprintf(path, sizeof path, "/proc/%d/task/%d/children", pid, pid);
      children.push_back(::open(path, O_RDONLY | O_CLOEXEC));
      std::snprintf(path, sizeof path, "/proc/%d/task", pid);
      tasks.push_back(::opendir(path));
    }
  }
  ~OpenFiles() {
    for (int fd : statm) ::close(fd);
    for (int fd : children) ::close(fd);
    for (DIR* d : tasks) ::closedir(d);
  }
  void read_statm() const {
    char buffer[128];
    for (int fd : statm) benchmark::DoNotOptimize(::pread(fd, buffer, sizeof buffer, 0));
  }
  void read_walk() const {
    read_statm();
    char buffer[4096];
    for (std::size_t i = 0; i < pids.size(); ++i) {
      ::rewinddir(tasks[i]);
      while (const dirent* e = ::readdir(tasks[i])) benchmark::DoNotOptimize(e);
      benchmark::DoNotOptimize(::pread(children[i], buffer, sizeof buffer, 0));
    }
  }
};

// Thread CPU ns per call of `body`, best of 5 rounds of `calls`.
template <typename Body>
double best_ns(int calls, Body&& body) {
  double best = 1e30;
  for (int round = 0; round < 5; ++round) {
    const double start = thread_ns();
    for (int k = 0; k < calls; ++k) body();
    best = std::min(best, (thread_ns() - start) / calls);
  }
  return best;
}

template <typename Body>
void measure(benchmark::State& state, int processes, double bare_ns, Body&& body) {
  std::int64_t calls = 0;
  const double start = thread_ns();
  for (auto _ : state) {
    body();
    ++calls;
  }
  const double per_call = calls ? (thread_ns() - start) / double(calls) : 0.0;
  state.counters["ns_per_process"] = per_call / processes;
  state.counters["x_bare"] = bare_ns > 0 ? per_call / bare_ns : 0.0;
}

void BM_BareStatm(benchmark::State& state) {
  SleepingTree tree(static_cast<int>(state.range(0)));
  OpenFiles files(tree.pids());
  measure(state, static_cast<int>(files.pids.size()), 0, [&] { files.read_statm(); });
}

void BM_BareWalk(benchmark::State& state) {
  SleepingTree tree(static_cast<int>(state.range(0)));
  OpenFiles files(tree.pids());
  const double statm = best_ns(2000, [&] { files.read_statm(); });
  measure(state, static_cast<int>(files.pids.size()), statm, [&] { files.read_walk(); });
  state.counters["x_bare_statm"] = state.counters["x_bare"];
  state.counters.erase("x_bare");
}

void BM_TreeSample(benchmark::State& state) {
  SleepingTree tree(static_cast<int>(state.range(0)));
  OpenFiles files(tree.pids());
  const double bare = best_ns(2000, [&] { files.read_walk(); });
  genscope::ProcessTree process_tree({.root_pid = tree.root()});
  auto probe = process_tree.make_probe();
  if (!probe->open().ok()) return state.SkipWithError("open failed");
  std::vector<double> row(probe->metrics().size());
  if (!probe->sample(row).ok() || row[1] != static_cast<double>(files.pids.size()))
    return state.SkipWithError("the tree was not found whole");
  measure(state, static_cast<int>(files.pids.size()), bare, [&] { probe->sample(row); });
  state.counters["x_bare_walk"] = state.counters["x_bare"];
  state.counters.erase("x_bare");
}

void BM_TreeSampleCgroup(benchmark::State& state) {
  std::optional<genscope::MemoryCgroup> cgroup;
  try {
    cgroup.emplace();
  } catch (const genscope::Error& e) {
    return state.SkipWithError(e.what());
  }
  {
    SleepingTree tree(static_cast<int>(state.range(0)), (cgroup->path() / "cgroup.procs").string());
    OpenFiles files(tree.pids());
    const int usage = ::open((cgroup->path() / "memory.usage_in_bytes").c_str(), O_RDONLY);
    char buffer[4096];
    // The floor here: statm of every process, the cgroup's usage and a fresh cgroup.procs.
    const double bare = best_ns(2000, [&] {
      files.read_statm();
      benchmark::DoNotOptimize(::pread(usage, buffer, 64, 0));
      const int procs = ::open((cgroup->path() / "cgroup.procs").c_str(), O_RDONLY);
      benchmark::DoNotOptimize(::read(procs, buffer, sizeof buffer));
      ::close(procs);
    });
    ::close(usage);
    genscope::ProcessTree process_tree(
        {.root_pid = tree.root(), .cgroup = cgroup->path(), .cgroup_version = cgroup->version()});
    auto probe = process_tree.make_probe();
    if (!probe->open().ok()) return state.SkipWithError("open failed");
    std::vector<double> row(probe->metrics().size());
    probe->sample(row);
    measure(state, static_cast<int>(files.pids.size()), bare, [&] { probe->sample(row); });
    state.counters["x_bare_cgroup"] = state.counters["x_bare"];
    state.counters.erase("x_bare");
  }
}

}  // namespace

BENCHMARK(BM_BareStatm)->Arg(1)->Arg(8)->Arg(64);
BENCHMARK(BM_BareWalk)->Arg(1)->Arg(8)->Arg(64);
BENCHMARK(BM_TreeSample)->Arg(1)->Arg(8)->Arg(64);
BENCHMARK(BM_TreeSampleCgroup)->Arg(1)->Arg(8)->Arg(64);
BENCHMARK_MAIN();
