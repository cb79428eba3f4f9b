// Tests of forwarding in-process runs over the event channel, with real child processes:
// the C++ example program (examples/minimal) and a Python program using the genscope binding
// and a tqdm bar, each started with GENSCOPE_EVENTS_FD, read by a WatchSession as `genscope
// run` reads them. Also: a parent that never reads (the child must not stall), a parent that
// is gone (no SIGPIPE death), a bad GENSCOPE_EVENTS_FD (a monitoring error, nothing else).
#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "genscope/run_json.hpp"
#include "event_line/channel_id.hpp"
#include "watch_test_util.hpp"

extern char** environ;

namespace genscope {
namespace {

namespace fs = std::filesystem;

fs::path scratch(const std::string& name) {
  const char* base = std::getenv("GENSCOPE_TEST_TMP");
  fs::path dir = fs::path(base != nullptr ? base : fs::temp_directory_path().string()) / "watch_forwarding";
  fs::create_directories(dir);
  return dir / name;
}

std::vector<std::string> env_with(const std::vector<std::string>& extra) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string s(*e);
    if (s.rfind("GENSCOPE_EVENTS_FD=", 0) == 0 || s.rfind("GENSCOPE_EVENTS_ID=", 0) == 0 ||
        s.rfind("GENSCOPE_LOG=", 0) == 0)
      continue;
    env.push_back(s);
  }
  env.insert(env.end(), extra.begin(), extra.end());
  return env;
}

// What `genscope run` puts in CMD's environment for its event channel `fd`.
std::vector<std::string> channel_env(int fd, std::vector<std::string> extra = {}) {
  extra.push_back("GENSCOPE_EVENTS_FD=" + std::to_string(fd));
  extra.push_back("GENSCOPE_EVENTS_ID=" + event_line::channel_id(fd));
  return env_with(extra);
}

struct Child {
  pid_t pid = -1;
  int status = -1;
};

// Starts argv with `env`; its stdout+stderr go to `out_fd` (or /dev/null when -1). The child
// inherits every descriptor without FD_CLOEXEC (the event channel's write end).
Child spawn(const std::vector<std::string>& argv, const std::vector<std::string>& env, int out_fd) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (out_fd >= 0) {
    posix_spawn_file_actions_adddup2(&actions, out_fd, 1);
    posix_spawn_file_actions_adddup2(&actions, out_fd, 2);
  } else {
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  }
  std::vector<char*> a;
  for (const auto& s : argv) a.push_back(const_cast<char*>(s.c_str()));
  a.push_back(nullptr);
  std::vector<char*> e;
  for (const auto& s : env) e.push_back(const_cast<char*>(s.c_str()));
  e.push_back(nullptr);
  Child c;
  EXPECT_EQ(posix_spawn(&c.pid, a[0], &actions, nullptr, a.data(), e.data()), 0) << argv[0];
  posix_spawn_file_actions_destroy(&actions);
  return c;
}

// Reads the event channel and the output until both close, as `genscope run` does, then
// reaps the child and tells the session.
void pump(testing::Harness& h, Child& c, int events_fd, int out_fd) {
  std::string events_partial;
  h.session.start(Step::now_ns());
  pollfd fds[2] = {{events_fd, POLLIN, 0}, {out_fd, POLLIN, 0}};
  int open = (events_fd >= 0) + (out_fd >= 0);
  if (events_fd < 0) fds[0].fd = -1;
  if (out_fd < 0) fds[1].fd = -1;
  char buf[65536];
  while (open > 0) {
    if (::poll(fds, 2, 30'000) <= 0) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      const ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
      const std::int64_t now = Step::now_ns();
      if (n <= 0) {
        fds[i].fd = -1;
        --open;
        continue;
      }
      if (i == 1) {
        h.session.output(2, std::string_view(buf, static_cast<std::size_t>(n)), now);
        continue;
      }
      events_partial.append(buf, static_cast<std::size_t>(n));
      std::size_t nl;
      while ((nl = events_partial.find('\n')) != std::string::npos) {
        h.session.event_line(std::string_view(events_partial).substr(0, nl), now);
        events_partial.erase(0, nl + 1);
      }
    }
  }
  ASSERT_EQ(::waitpid(c.pid, &c.status, 0), c.pid);
  h.session.program_exited(c.status, Step::now_ns());
}

bool has_error(const genscope::Run& run, const std::string& source, const std::string& text) {
  for (const MonitoringError& e : run.monitoring_errors) {
    if (e.source == source && e.message.find(text) != std::string::npos) return true;
  }
  return false;
}

TEST(Forwarding, ACppProgramsStepsBecomeStepsOfTheParentsRun) {
  if (!fs::exists(GENSCOPE_MINIMAL)) GTEST_SKIP() << "examples/minimal is not built";
  int events[2];
  ASSERT_EQ(::pipe2(events, O_CLOEXEC), 0);
  ::fcntl(events[1], F_SETFD, 0);  // the child inherits the write end
  const fs::path child_doc = scratch("minimal.json");
  Child c = spawn({GENSCOPE_MINIMAL, child_doc.string(), "5"},
                  channel_env(events[1]), -1);
  ::close(events[1]);
  testing::Harness h;
  pump(h, c, events[0], -1);
  ::close(events[0]);
  ASSERT_TRUE(WIFEXITED(c.status) && WEXITSTATUS(c.status) == 0);
  EXPECT_EQ(h.session.stats().malformed_event_lines, 0u);
  const genscope::Run child = read_run_file(child_doc);
  // The program announced its run: the parent's run before it had no step, so it is not
  // written as a startup run of its own.
  ASSERT_EQ(h.runs.size(), 1u);
  const genscope::Run& run = h.runs[0];
  EXPECT_EQ(run.labels.at("watch.announced_by"), "forwarded");
  EXPECT_EQ(run.labels.at("inprocess.run_id"), child.id);
  EXPECT_EQ(run.pipeline.name, "minimal");
  ASSERT_EQ(run.steps.size(), child.steps.size());
  for (std::size_t i = 0; i < child.steps.size(); ++i) {
    const StepRecord& mine = run.steps[i];
    const StepRecord& theirs = child.steps[i];
    SCOPED_TRACE(theirs.name);
    EXPECT_EQ(mine.name, theirs.name);
    EXPECT_EQ(mine.kind, theirs.kind);
    EXPECT_EQ(mine.status, theirs.status);
    EXPECT_EQ(mine.error_message, theirs.error_message);
    EXPECT_EQ(mine.iteration_ns, theirs.iteration_ns);  // the in-process durations, exactly
    EXPECT_EQ(mine.attempts.size(), theirs.attempts.size());
    EXPECT_EQ(mine.counters, theirs.counters);
    EXPECT_EQ(mine.parent_id, theirs.parent_id);  // nesting follows the order of the lines
    EXPECT_EQ(mine.labels.at("inprocess.duration_ns"), std::to_string(theirs.duration_ns));
    // Both sides' figures: the parent's probes (here its own process; under genscope run, the
    // process tree) and the child's in-process ones, renamed where the names meet.
    const MetricFigures* own = theirs.metric("process.rss_bytes");
    ASSERT_NE(own, nullptr);
    const MetricFigures* forwarded = mine.metric("inprocess.process.rss_bytes");
    ASSERT_NE(forwarded, nullptr);
    EXPECT_EQ(forwarded->peak, own->peak);
    EXPECT_NE(mine.metric("process.rss_bytes"), nullptr);
  }
}

TEST(Forwarding, APythonProgramsStepAndItsTqdmBarAreOneStep) {
  const fs::path build = fs::path(GENSCOPE_MINIMAL).parent_path().parent_path().parent_path();
  bool have_module = false;
  if (fs::exists(build / "python" / "genscope")) {
    for (const auto& e : fs::directory_iterator(build / "python" / "genscope")) {
      have_module = have_module || e.path().filename().string().rfind("_genscope", 0) == 0;
    }
  }
  if (!have_module) GTEST_SKIP() << "the Python binding is not built";
  const char* script =
      "import time, genscope\n"
      "from tqdm import tqdm\n"
      "m = genscope.Monitor(nvml=False, sample_interval_ms=2)\n"
      "run = m.start_run(pipeline='py-t2i')\n"
      "with run.step('sampling', 'denoise') as s:\n"
      "    s.begin_iterations()\n"
      "    for i in tqdm(range(8)):\n"
      "        time.sleep(0.04)\n"
      "        s.mark_iteration()\n"
      "    s.add_counter('latents', 1)\n"
      "run.finish()\n";
  int events[2];
  int out[2];
  ASSERT_EQ(::pipe2(events, O_CLOEXEC), 0);
  ASSERT_EQ(::pipe2(out, O_CLOEXEC), 0);
  ::fcntl(events[1], F_SETFD, 0);
  Child c = spawn({GENSCOPE_PYTHON, "-c", script},
                  channel_env(events[1], {"PYTHONPATH=" + (build / "python").string()}),
                  out[1]);
  ::close(events[1]);
  ::close(out[1]);
  testing::Harness h;
  pump(h, c, events[0], out[0]);
  ::close(events[0]);
  ::close(out[0]);
  ASSERT_TRUE(WIFEXITED(c.status));
  if (WEXITSTATUS(c.status) != 0) GTEST_SKIP() << "the Python child failed (python3-tqdm missing?)";
  ASSERT_EQ(h.runs.size(), 1u);  // the imports before the announced run held no step
  const genscope::Run& run = h.runs[0];
  ASSERT_EQ(run.steps.size(), 1u) << "the bar and the in-process step were not merged";
  const StepRecord& s = run.steps[0];
  EXPECT_EQ(s.name, "denoise");
  EXPECT_EQ(s.kind, StepKind::kSampling);
  EXPECT_EQ(s.iteration_ns.size(), 8u);
  EXPECT_FALSE(s.iterations_inferred);  // the in-process marks, not the bar's redraws
  EXPECT_EQ(s.counters.at("latents"), 1);
  EXPECT_NE(s.metric("inprocess.process.rss_bytes"), nullptr);
}

TEST(Forwarding, AParentThatDoesNotReadNeverStallsTheChild) {
  if (!fs::exists(GENSCOPE_MINIMAL)) GTEST_SKIP() << "examples/minimal is not built";
  int events[2];
  ASSERT_EQ(::pipe2(events, O_CLOEXEC | O_NONBLOCK), 0);
  // Fill the pipe: the child finds no room at all.
  const std::string block(4096, 'x');
  while (::write(events[1], block.data(), block.size()) > 0) {
  }
  ::fcntl(events[1], F_SETFL, 0);  // blocking again, as a parent's pipe would be
  ::fcntl(events[1], F_SETFD, 0);
  const fs::path child_doc = scratch("minimal-stalled.json");
  const auto t0 = std::chrono::steady_clock::now();
  Child c = spawn({GENSCOPE_MINIMAL, child_doc.string(), "5"},
                  channel_env(events[1]), -1);
  ASSERT_EQ(::waitpid(c.pid, &c.status, 0), c.pid);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ::close(events[0]);
  ::close(events[1]);
  ASSERT_TRUE(WIFEXITED(c.status) && WEXITSTATUS(c.status) == 0);
  EXPECT_LT(seconds, 30.0);  // at most one 100 ms wait, then no more waiting
  const genscope::Run child = read_run_file(child_doc);
  EXPECT_TRUE(has_error(child, "events", "not reading the event channel")) << to_json(child).dump(1);
}

TEST(Forwarding, AParentThatIsGoneDoesNotKillTheChildWithSigpipe) {
  if (!fs::exists(GENSCOPE_MINIMAL)) GTEST_SKIP() << "examples/minimal is not built";
  int events[2];
  ASSERT_EQ(::pipe2(events, O_CLOEXEC), 0);
  ::close(events[0]);  // nobody will ever read
  ::fcntl(events[1], F_SETFD, 0);
  const fs::path child_doc = scratch("minimal-gone.json");
  Child c = spawn({GENSCOPE_MINIMAL, child_doc.string(), "5"},
                  channel_env(events[1]), -1);
  ::close(events[1]);
  ASSERT_EQ(::waitpid(c.pid, &c.status, 0), c.pid);
  ASSERT_TRUE(WIFEXITED(c.status)) << "killed by signal " << WTERMSIG(c.status);
  EXPECT_EQ(WEXITSTATUS(c.status), 0);
  const genscope::Run child = read_run_file(child_doc);
  EXPECT_TRUE(has_error(child, "events", "closed the event channel"));
}

TEST(Forwarding, ABadDescriptorIsAMonitoringErrorOnly) {
  if (!fs::exists(GENSCOPE_MINIMAL)) GTEST_SKIP() << "examples/minimal is not built";
  for (const std::string value : {"abc", "987"}) {
    const fs::path child_doc = scratch("minimal-bad-" + value + ".json");
    Child c = spawn({GENSCOPE_MINIMAL, child_doc.string(), "5"}, env_with({"GENSCOPE_EVENTS_FD=" + value}), -1);
    ASSERT_EQ(::waitpid(c.pid, &c.status, 0), c.pid);
    ASSERT_TRUE(WIFEXITED(c.status) && WEXITSTATUS(c.status) == 0);
    const genscope::Run child = read_run_file(child_doc);
    EXPECT_TRUE(has_error(child, "events", "GENSCOPE_EVENTS_FD")) << value;
  }
}

// Issue 20: a stale GENSCOPE_EVENTS_FD (a worker started with close_fds, its descriptor N now
// its own result file; a pipe that is not genscope's; no GENSCOPE_EVENTS_ID) is never written
// into: the file keeps every byte, the run records why nothing was forwarded.
TEST(Forwarding, AStaleVariableIsNeverWrittenInto) {
  if (!fs::exists(GENSCOPE_MINIMAL)) GTEST_SKIP() << "examples/minimal is not built";
  const fs::path result = scratch("worker-result.txt");
  const std::string content = "line 1\nline 2\nline 3\nline 4\n";
  std::ofstream(result) << content;
  int other[2];  // a pipe, but not the one the identity names
  ASSERT_EQ(::pipe2(other, O_CLOEXEC | O_NONBLOCK), 0);
  int channel[2];
  ASSERT_EQ(::pipe2(channel, O_CLOEXEC), 0);
  const std::string channel_id = event_line::channel_id(channel[1]);
  struct Case {
    std::string name;
    int fd;
    std::vector<std::string> env;
    std::string error;
  };
  const int file = ::open(result.c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(file, 0);
  const std::vector<Case> cases = {
      {"a regular file, with the identity of genscope's pipe", file,
       {"GENSCOPE_EVENTS_FD=" + std::to_string(file), "GENSCOPE_EVENTS_ID=" + channel_id}, "not a pipe"},
      {"a regular file, no identity", file, {"GENSCOPE_EVENTS_FD=" + std::to_string(file)}, "not a pipe"},
      {"another pipe", other[1],
       {"GENSCOPE_EVENTS_FD=" + std::to_string(other[1]), "GENSCOPE_EVENTS_ID=" + channel_id},
       "not genscope's event channel"},
      {"a pipe without identity", other[1], {"GENSCOPE_EVENTS_FD=" + std::to_string(other[1])},
       "without GENSCOPE_EVENTS_ID"},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(k.name);
    ::fcntl(k.fd, F_SETFD, 0);
    const fs::path child_doc = scratch("minimal-stale.json");
    Child c = spawn({GENSCOPE_MINIMAL, child_doc.string(), "3"}, env_with(k.env), -1);
    ASSERT_EQ(::waitpid(c.pid, &c.status, 0), c.pid);
    ::fcntl(k.fd, F_SETFD, FD_CLOEXEC);
    ASSERT_TRUE(WIFEXITED(c.status) && WEXITSTATUS(c.status) == 0);
    std::ifstream in(result);
    const std::string now((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_EQ(now, content) << "the worker's file was written into";
    char byte;
    EXPECT_EQ(::read(other[0], &byte, 1), -1) << "the other pipe got event lines";
    const genscope::Run child = read_run_file(child_doc);
    EXPECT_TRUE(has_error(child, "events", k.error)) << to_json(child).dump(1);
  }
  for (int fd : {file, other[0], other[1], channel[0], channel[1]}) ::close(fd);
}

}  // namespace
}  // namespace genscope
