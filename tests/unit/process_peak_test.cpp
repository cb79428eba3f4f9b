// The process probe's exact peak through getrusage(): equal to VmHWM when the kernel's
// signal->maxrss is below the window, and a correct fallback to /proc/self/status when an
// exited thread left a stale, larger signal->maxrss behind.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/resource.h>

#include <cstring>
#include <fstream>
#include <string>
#include <thread>

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

TEST(ProcessPeak, StaleMaxrssFromAnExitedThreadFallsBackToVmHwm) {
  auto probe = make_process_probe();
  ASSERT_TRUE(probe->open().ok());
  // A 96 MiB peak, then a thread exit copies it into signal->maxrss; then it is freed.
  void* p = mmap(nullptr, 96 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(p, MAP_FAILED);
  std::memset(p, 1, 96 << 20);
  std::thread([] {}).join();
  munmap(p, 96 << 20);
  ASSERT_TRUE(probe->reset_peaks().ok());
  // Precondition of this case: getrusage() now reports the stale 96 MiB-high mark.
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
}

}  // namespace
}  // namespace genscope
