// genscope_test_child: a real child program for the process-side tests of `genscope run`
// and `genscope watch` (no mocks: a process that allocates, forks, prints and dies on cue).
//
//   test_child serve             commands from stdin, one per line, each answered "done\n":
//                                  alloc MiB        allocate and touch MiB, keep it
//                                  free             free what alloc kept
//                                  spike MiB MS     allocate+touch MiB, hold MS ms, free
//                                  grandchild MiB HOLD LINGER
//                                                   fork a child that forks a grandchild;
//                                                   the grandchild allocates+touches MiB,
//                                                   holds HOLD ms, frees, answers "done",
//                                                   lives LINGER ms more, exits; its parent
//                                                   waits for it, then exits
//                                  event JSON       writes JSON + '\n' on $GENSCOPE_EVENTS_FD
//                                  exit CODE        exits with CODE
//   test_child exit CODE         exits with CODE at once
//   test_child fds               prints its open descriptors (except the one listing them)
//   test_child bytes N SEED      writes N pseudo-random bytes (binary) to stdout
//   test_child long-lines N LEN  writes N lines of LEN bytes ('x') to stdout
//   test_child ignore-sigint MS  ignores SIGINT, prints "ready", sleeps MS ms, exits 0
//   test_child events            writes a begin/iteration/end step on $GENSCOPE_EVENTS_FD
//   test_child spin MS           burns CPU for MS ms (benchmarks)
//   test_child work ROUNDS       a fixed amount of CPU work; prints "work_ns N cpu_ns C"
//   test_child tree-events MiB   event begin "spike", grandchild spike of MiB for a few ms
//                                (alive until after the step's end event), end; exits 0
#include <dirent.h>
#include <malloc.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr std::size_t kMiB = 1024 * 1024;

char* touch(std::size_t mib) {
  // mmap'ed by malloc above its threshold, so free() returns it to the kernel at once.
  char* p = static_cast<char*>(std::malloc(mib * kMiB));
  if (p == nullptr) std::exit(90);
  for (std::size_t i = 0; i < mib * kMiB; i += 4096) p[i] = static_cast<char>(i >> 12 | 1);
  return p;
}

void sleep_ms(long ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

void say(const char* text) {
  std::fputs(text, stdout);
  std::fflush(stdout);
}

void event(const std::string& json) {
  const char* fd_text = std::getenv("GENSCOPE_EVENTS_FD");
  if (fd_text == nullptr) return;
  const std::string line = json + "\n";
  if (::write(std::atoi(fd_text), line.data(), line.size()) < 0) std::exit(91);
}

// Child -> grandchild; the grandchild spikes, says done, lingers, exits; the child waits.
void grandchild(std::size_t mib, long hold_ms, long linger_ms) {
  const pid_t child = ::fork();
  if (child < 0) std::exit(92);
  if (child > 0) return;  // the caller goes on; the child is reaped later
  const pid_t grand = ::fork();
  if (grand < 0) ::_exit(93);
  if (grand == 0) {
    char* p = touch(mib);
    sleep_ms(hold_ms);
    std::free(p);
    say("done\n");
    sleep_ms(linger_ms);
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(grand, &status, 0);
  ::_exit(0);
}

int serve() {
  std::vector<char*> kept;
  std::string line;
  while (std::getline(std::cin, line)) {
    std::istringstream in(line);
    std::string cmd;
    in >> cmd;
    if (cmd == "alloc") {
      std::size_t mib = 0;
      in >> mib;
      kept.push_back(touch(mib));
      say("done\n");
    } else if (cmd == "free") {
      for (char* p : kept) std::free(p);
      kept.clear();
      say("done\n");
    } else if (cmd == "spike") {
      std::size_t mib = 0;
      long ms = 0;
      in >> mib >> ms;
      char* p = touch(mib);
      sleep_ms(ms);
      std::free(p);
      say("done\n");
    } else if (cmd == "grandchild") {
      std::size_t mib = 0;
      long hold = 0, linger = 0;
      in >> mib >> hold >> linger;
      grandchild(mib, hold, linger);  // the grandchild answers
    } else if (cmd == "event") {
      std::string json;
      std::getline(in >> std::ws, json);
      event(json);
      say("done\n");
    } else if (cmd == "exit") {
      int code = 0;
      in >> code;
      return code;
    }
    // Reap children that ended (grandchild commands).
    while (::waitpid(-1, nullptr, WNOHANG) > 0) {
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // A fixed mmap threshold: every allocation here is mmap'ed and returned to the kernel by
  // free() (glibc otherwise raises the threshold after the first free).
  ::mallopt(M_MMAP_THRESHOLD, 128 * 1024);
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "serve") return serve();
  if (mode == "exit" && argc > 2) return std::atoi(argv[2]);
  if (mode == "fds") {
    DIR* dir = ::opendir("/proc/self/fd");
    if (dir == nullptr) return 2;
    const int own = ::dirfd(dir);
    while (const dirent* e = ::readdir(dir)) {
      if (e->d_name[0] == '.' || std::atoi(e->d_name) == own) continue;
      std::printf("%s\n", e->d_name);
    }
    ::closedir(dir);
    return 0;
  }
  if (mode == "bytes" && argc > 3) {
    std::size_t n = std::strtoull(argv[2], nullptr, 10);
    std::mt19937_64 gen(std::strtoull(argv[3], nullptr, 10));
    std::vector<std::uint64_t> block(8192);
    while (n > 0) {
      for (auto& v : block) v = gen();
      const std::size_t size = std::min(n, block.size() * 8);
      if (std::fwrite(block.data(), 1, size, stdout) != size) return 3;
      n -= size;
    }
    return 0;
  }
  if (mode == "long-lines" && argc > 3) {
    const long count = std::atol(argv[2]);
    const std::string line(std::strtoull(argv[3], nullptr, 10), 'x');
    for (long i = 0; i < count; ++i) {
      std::fwrite(line.data(), 1, line.size(), stdout);
      std::fputc('\n', stdout);
    }
    return 0;
  }
  if (mode == "ignore-sigint" && argc > 2) {
    ::signal(SIGINT, SIG_IGN);
    say("ready\n");
    sleep_ms(std::atol(argv[2]));
    say("finished\n");
    return 0;
  }
  if (mode == "events") {
    event(R"({"event":"begin","kind":"sampling","name":"denoise"})");
    for (int i = 0; i < 3; ++i) event(R"({"event":"iteration"})");
    event(R"({"event":"end"})");
    return 0;
  }
  if (mode == "work" && argc > 2) {  // a fixed amount of CPU work; prints the ns it took
    const long rounds = std::atol(argv[2]);
    const auto start = std::chrono::steady_clock::now();
    volatile std::uint64_t x = 1;
    for (long r = 0; r < rounds; ++r) {
      for (int i = 0; i < 100000; ++i) x = x * 6364136223846793005ull + 1442695040888963407ull;
    }
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
        std::chrono::steady_clock::now() - start);
    rusage self{};
    ::getrusage(RUSAGE_SELF, &self);
    const double cpu = double(self.ru_utime.tv_sec + self.ru_stime.tv_sec) * 1e9 +
                       double(self.ru_utime.tv_usec + self.ru_stime.tv_usec) * 1e3;
    std::printf("work_ns %lld cpu_ns %.0f\n", static_cast<long long>(ns.count()), cpu);
    return static_cast<int>(x & 0);
  }
  if (mode == "spin" && argc > 2) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(std::atol(argv[2]));
    volatile std::uint64_t x = 1;
    while (std::chrono::steady_clock::now() < end) {
      for (int i = 0; i < 100000; ++i) x = x * 6364136223846793005ull + 1442695040888963407ull;
    }
    return static_cast<int>(x & 0);
  }
  if (mode == "tree-events" && argc > 2) {
    const std::size_t mib = std::strtoull(argv[2], nullptr, 10);
    event(R"({"event":"begin","kind":"custom","name":"before"})");
    sleep_ms(50);
    event(R"({"event":"end"})");
    event(R"({"event":"begin","kind":"custom","name":"spike"})");
    // genscope reads events asynchronously: give it time to close "before" (its cgroup figure
    // counts every page of the tree) before the spike starts, even on a loaded machine.
    sleep_ms(30);
    int answer[2];
    if (::pipe(answer) != 0) return 4;
    const pid_t child = ::fork();
    if (child == 0) {
      const pid_t grand = ::fork();
      if (grand == 0) {
        char* p = touch(mib);
        sleep_ms(5);
        std::free(p);
        (void)!::write(answer[1], "x", 1);
        sleep_ms(400);  // alive until after the step's end: its VmHWM is read then
        ::_exit(0);
      }
      ::waitpid(grand, nullptr, 0);
      ::_exit(0);
    }
    char c;
    if (::read(answer[0], &c, 1) != 1) return 5;
    sleep_ms(50);
    event(R"({"event":"end"})");
    ::waitpid(child, nullptr, 0);
    event(R"({"event":"begin","kind":"custom","name":"after"})");
    sleep_ms(50);
    event(R"({"event":"end"})");
    return 0;
  }
  std::fprintf(stderr, "usage: test_child serve|exit|fds|bytes|long-lines|ignore-sigint|events|spin|tree-events\n");
  return 2;
}
