// `genscope run [OPTIONS] -- CMD [ARGS...]`: runs CMD unchanged (output passed through byte
// for byte, signals forwarded, its exit status returned) while following the memory of its
// whole process tree and reading its steps from what it prints and from its event channel.
// Exit status: CMD's (128 + N when a signal N ended it); 127 when CMD cannot start; 2 when
// genscope's own options are wrong (before CMD starts). docs/run.md, docs/cli.md.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <optional>

#include "command.hpp"
#include "genscope/buffered_observer.hpp"
#include "genscope/child_process.hpp"
#include "genscope/distributed.hpp"
#include "genscope/error.hpp"
#include "genscope/merge.hpp"
#include "genscope/report.hpp"
#include "genscope/run_json.hpp"
#include "genscope/memory_cgroup.hpp"
#include "genscope/process_tree.hpp"
#include "genscope/step.hpp"
#include "watched_runs.hpp"

namespace genscope::cli {
namespace {

// Feeds what CMD does to the session and the tree.
class RunObserver final : public ChildObserver {
 public:
  RunObserver(WatchSession& session, ProcessTree& tree, const ChildProcess& child)
      : session_(session), tree_(tree), child_(child) {}
  void output(int stream, std::string_view bytes, std::int64_t steady_ns) override {
    session_.output(stream, bytes, steady_ns);
  }
  void event_line(std::string_view line, std::int64_t steady_ns) override {
    session_.event_line(line, steady_ns);
  }
  void reaped(int pid, int /*wait_status*/, double maxrss_bytes) override {
    // CMD's ru_maxrss includes the genscope image it was forked from: above genscope's own
    // peak at that moment it is CMD's, otherwise it says nothing about CMD.
    if (pid == child_.pid() && !(maxrss_bytes > child_.spawn_hwm_bytes())) maxrss_bytes = NAN;
    tree_.process_exited(pid, maxrss_bytes);
  }

 private:
  WatchSession& session_;
  ProcessTree& tree_;
  const ChildProcess& child_;
};

// How long the analysis may go on catching up once CMD exited (docs/reliability.md).
constexpr std::chrono::milliseconds kAnalysisDrainBudget{10'000};

std::string program_name(const std::string& path) {
  const std::size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// A distributed job under `genscope run` (docs/distributed.md): CMD and everything it starts
// get the launch's group id, and with --out DIR the folder where ranks that use genscope
// write their own runs (DIR/ranks/rank<R>.json). Set before any thread starts (setenv).
std::filesystem::path prepare_rank_runs(const std::string& out_dir) {
  const auto now = std::chrono::duration_cast<std::chrono::milliseconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  const std::string group =
      "genscope:" + std::string(host) + ":" + std::to_string(::getpid()) + ":" + std::to_string(now);
  ::setenv(kDistributedGroupVariable, group.c_str(), 1);
  if (out_dir.empty()) {
    ::unsetenv(kRankRunDirVariable);
    return {};
  }
  const std::filesystem::path dir = std::filesystem::absolute(std::filesystem::path(out_dir) / "ranks");
  std::error_code ec;
  // The ranks of an earlier run into the same --out folder are not this launch's.
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("rank", 0) == 0 && entry.path().extension() == ".json") std::filesystem::remove(entry.path(), ec);
  }
  ::setenv(kRankRunDirVariable, dir.c_str(), 1);
  return dir;
}

// After CMD: the ranks' runs written to DIR/ranks merged with the launcher's run.json into
// DIR/merged.json, and the spread printed. Problems are warnings: CMD's exit status stands.
void merge_rank_runs(const std::filesystem::path& dir, const std::string& out_dir, bool plain) {
  std::vector<std::filesystem::path> paths;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("rank", 0) == 0 && entry.path().extension() == ".json") paths.push_back(entry.path());
  }
  if (paths.empty()) return;
  std::sort(paths.begin(), paths.end());
  try {
    std::vector<Run> runs;
    for (const auto& p : paths) runs.push_back(read_run_file(p));
    // The launcher's run (CMD's process tree: torchrun and the ranks' processes) is marked as
    // the launcher of the ranks' group.
    const std::filesystem::path launcher = std::filesystem::path(out_dir) / "run.json";
    if (std::filesystem::exists(launcher, ec)) {
      Run run = read_run_file(launcher);
      DistributedInfo info;
      info.role = "launcher";
      info.world_size = runs.front().distributed ? runs.front().distributed->world_size : 0;
      const char* group = std::getenv(kDistributedGroupVariable);  // set by prepare_rank_runs()
      info.group = group != nullptr ? group : "";
      info.group_source = "genscope";
      run.distributed = info;
      write_run_file(run, launcher);
      runs.push_back(std::move(run));
    }
    const MergedRun merged = merge_runs(std::move(runs));
    const std::filesystem::path out = std::filesystem::path(out_dir) / "merged.json";
    write_file_atomic(out, to_json(merged).dump(1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
    std::cerr << render_merged_summary(merged, plain) << "merged document: " << out.string() << "\n";
  } catch (const Error& e) {
    std::cerr << "genscope: warning: the " << paths.size() << " rank runs in " << dir.string()
              << " were not merged: [" << e.name() << "] " << e.what() << "\n";
  }
}

}  // namespace

void register_run_command(CLI::App& app, CommandContext& context) {
  struct Options {
    WatchedRunOptions watched;
    std::vector<std::string> command;
    bool pty = false;
    bool no_cgroup = false;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "run", "Run CMD unchanged and monitor it: memory of its process tree, steps from its output");
  cmd->add_flag("--pty", o->pty, "Give CMD terminals as stdout/stderr (programs that only draw bars on a terminal)");
  cmd->add_flag("--no-cgroup", o->no_cgroup, "Do not create a memory cgroup for CMD");
  add_watched_run_options(*cmd, o->watched);
  // Everything from CMD on belongs to CMD, options included (`genscope run ls -la`): CMD is
  // the first argument that is not one of genscope's options, or whatever follows "--".
  cmd->prefix_command();
  cmd->footer("CMD: genscope run [OPTIONS] [--] CMD [ARGS...]");
  cmd->callback([o, cmd, &context] {
    o->command = context.program.empty() ? cmd->remaining() : context.program;
    if (o->command.empty()) throw Error("MissingCommand", "genscope run: no CMD to run");
    const std::filesystem::path rank_dir = prepare_rank_runs(o->watched.out_dir);
    // Before CMD starts: every option checked (a bad rule file is an error, exit 2).
    WatchedRuns runs(o->watched, program_name(o->command.front()), "run");
    std::vector<std::string> notes;
    std::optional<MemoryCgroup> cgroup;
    if (!o->no_cgroup) {
      try {
        cgroup.emplace();
        if (const int stale = cgroup->stale_removed(); stale > 0)
          notes.push_back("removed " + std::to_string(stale) +
                          " memory cgroup(s) left by genscope processes that were killed");
      } catch (const Error& e) {
        notes.push_back(std::string("no memory cgroup: ") + e.what());
      }
    }
    ChildOptions co;
    co.argv = o->command;
    co.pty = o->pty;
    if (cgroup) co.cgroup = cgroup->path();
    ChildProcess child(co);  // blocks the forwarded signals before any thread starts
    ProcessTreeOptions to;
    to.reset_peaks = !o->watched.no_peak_reset;
    if (cgroup) {
      to.cgroup = cgroup->path();
      to.cgroup_version = cgroup->version();
    }
    auto tree = std::make_shared<ProcessTree>(to);
    WatchSession& session = runs.start_session(tree, notes);
    try {
      child.start();
    } catch (const Error& e) {
      std::cerr << "genscope: error [" << e.name() << "]: " << e.what() << "\n";
      context.exit_code = 127;
      return;
    }
    tree->set_root(child.pid());
    session.start(Step::now_ns());
    RunObserver observer(session, *tree, child);
    // CMD's output is passed on at once; the session reads it on its own thread.
    BufferedObserver buffered(observer);
    const int status = child.run(buffered);
    // Bounded time after CMD exits: what analysis has not caught up with by then is counted.
    buffered.finish(kAnalysisDrainBudget);
    if (const std::uint64_t dropped = buffered.dropped_bytes(); dropped > 0) {
      const std::string note = std::to_string(dropped) +
                               " bytes of CMD's output were passed on but not read for steps "
                               "(CMD wrote faster than they could be matched)";
      std::cerr << "genscope: warning: " << note << "\n";
      runs.set_ending(note);
    }
    if (const std::uint64_t lost = buffered.dropped_event_lines(); lost > 0) {
      const std::string note = std::to_string(lost) +
                               " event-channel lines were not analysed: they were still queued " +
                               std::to_string(kAnalysisDrainBudget.count() / 1000) +
                               " s after CMD exited";
      std::cerr << "genscope: warning: " << note << "\n";
      runs.set_ending(note);
    }
    for (const std::string& note : child.pass_through_notes()) {
      std::cerr << "genscope: warning: " << note << "\n";
      runs.set_ending(note);
    }
    session.program_exited(status, Step::now_ns());
    if (!buffered.inner_error().empty())
      std::cerr << "genscope: warning: monitoring stopped early: " << buffered.inner_error() << "\n";
    runs.finish();
    if (!rank_dir.empty()) merge_rank_runs(rank_dir, o->watched.out_dir, o->watched.plain);
    if (cgroup) {
      if (const std::string error = cgroup->remove(); !error.empty())
        std::cerr << "genscope: warning: " << error << "\n";
    }
    context.exit_code = ChildProcess::exit_code(status);
  });
}

}  // namespace genscope::cli
