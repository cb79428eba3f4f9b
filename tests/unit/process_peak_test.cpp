// The process probe's exact peak through getrusage(): equal to VmHWM when the kernel's
// signal->maxrss is below the window, and a correct fallback to /proc/self/status when an
// exited thread left a stale, larger signal->maxrss behind.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/resource.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include "genscope/probe.hpp"

namespace genscope {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

double vmhwm_bytes() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stod(line.substr(6)) * 1024.0;
  }
  return -1;
}

void touch_and_free(std::size_t bytes) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(p, MAP_FAILED);
  std::memset(p, 1, bytes);
  munmap(p, bytes);
}

double read_peak(Probe& probe) {
  double v[1];
  EXPECT_TRUE(probe.read_peaks(v).ok());
  return v[0];
}

TEST(ProcessPeak, AgreesWithVmHwmOfTheWindow) {
  auto probe = make_process_probe();
  ASSERT_TRUE(probe->open().ok());
  ASSERT_TRUE(probe->reset_peaks().ok());
  touch_and_free(static_cast<std::size_t>(32 * kMiB));
  const double ours = read_peak(*probe);
  const double kernel = vmhwm_bytes();
  EXPECT_NEAR(ours, kernel, 8 * 4096.0);
  double rss[1];
  ASSERT_TRUE(probe->sample(rss).ok());
  EXPECT_GT(ours - rss[0], 30 * kMiB);
}

// signal->maxrss keeps the peak of the image before exec(): a child touches 96 MiB, then
// re-executes this test binary, which runs the check below with a stale, larger ru_maxrss.
TEST(ProcessPeak, StaleMaxrssAfterExecFallsBackToVmHwm) {
  if (std::getenv("GENSCOPE_PEAK_CHILD") != nullptr) {
    auto probe = make_process_probe();
    ASSERT_TRUE(probe->open().ok());
    ASSERT_TRUE(probe->reset_peaks().ok());
    // Precondition of this case: getrusage() reports the pre-exec 96 MiB mark.
    rusage u{};
    ASSERT_EQ(getrusage(RUSAGE_SELF, &u), 0);
    double now[1];
    ASSERT_TRUE(probe->sample(now).ok());
    ASSERT_GT(static_cast<double>(u.ru_maxrss) * 1024.0 - now[0], 64 * kMiB);
    touch_and_free(static_cast<std::size_t>(8 * kMiB));
    const double ours = read_peak(*probe);
    // The window's peak is the 8 MiB spike over the current RSS, not the old 96 MiB one.
    EXPECT_NEAR(ours, vmhwm_bytes(), 8 * 4096.0);
    double rss[1];
    ASSERT_TRUE(probe->sample(rss).ok());
    EXPECT_LT(ours - rss[0], 16 * kMiB);
    EXPECT_GT(ours - rss[0], 7 * kMiB);
    return;
  }
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    void* p = mmap(nullptr, 96 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) _exit(3);
    std::memset(p, 1, 96 << 20);
    setenv("GENSCOPE_PEAK_CHILD", "1", 1);
    char self[] = "/proc/self/exe";
    char filter[] = "--gtest_filter=ProcessPeak.StaleMaxrssAfterExecFallsBackToVmHwm";
    char* args[] = {self, filter, nullptr};
    execv(self, args);
    _exit(4);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the re-executed check failed";
}

}  // namespace
}  // namespace genscope
