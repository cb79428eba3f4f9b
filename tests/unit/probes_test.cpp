// Tests of the procfs probes (process, system), the allocator probe, the procfs parsers
// and read_host_info().
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <thread>

#include "genscope/host.hpp"
#include "genscope/probe.hpp"
#include "probes/proc_file.hpp"
#include "probes/procfs_probes.hpp"

namespace genscope {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

double status_field_bytes(const char* key) {
  std::ifstream in("/proc/self/status");
  std::string text((std::istreambuf_iterator<char>(in)), {});
  return static_cast<double>(detail::parse_kb_field(text, key).value());
}

TEST(ProcParse, KbFieldMatchesWholeKeysAtLineStart) {
  const std::string_view text = "XVmHWM:\t 1 kB\nVmHWM:\t   2048 kB\nVmRSS:  7 kB\nBad:  x kB\n";
  EXPECT_EQ(detail::parse_kb_field(text, "VmHWM"), 2048u * 1024);
  EXPECT_EQ(detail::parse_kb_field(text, "VmRSS"), 7u * 1024);
  EXPECT_EQ(detail::parse_kb_field(text, "VmHW"), std::nullopt);    // prefix of a key
  EXPECT_EQ(detail::parse_kb_field(text, "VmSwap"), std::nullopt);  // absent
  EXPECT_EQ(detail::parse_kb_field(text, "Bad"), std::nullopt);     // not a number
  EXPECT_EQ(detail::parse_kb_field("Big: 99999999999999999999 kB\n", "Big"), std::nullopt);
  EXPECT_EQ(detail::parse_kb_field("Huge: 18014398509481984 kB", "Huge"), std::nullopt);
  EXPECT_EQ(detail::parse_kb_field("", "MemTotal"), std::nullopt);
}

TEST(ProcParse, StatmResidentIsTheSecondField) {
  EXPECT_EQ(detail::parse_statm_resident_pages("765 403 374 5 0 123 0\n"), 403u);
  EXPECT_EQ(detail::parse_statm_resident_pages("765\n"), std::nullopt);
  EXPECT_EQ(detail::parse_statm_resident_pages(""), std::nullopt);
}

TEST(ProcessProbe, DescribesOneExactPeakMetric) {
  auto probe = make_process_probe();
  EXPECT_EQ(probe->name(), "process");
  ASSERT_EQ(probe->metrics().size(), 1u);
  EXPECT_EQ(probe->metrics()[0].name, "process.rss_bytes");
  EXPECT_EQ(probe->metrics()[0].unit, Unit::kBytes);
  EXPECT_TRUE(probe->metrics()[0].exact_peak);
  EXPECT_FALSE(probe->may_block());
}

TEST(ProcessProbe, SampleBeforeOpenIsAnErrorNotACrash) {
  auto probe = make_process_probe();
  double value = 0;
  EXPECT_FALSE(probe->sample({&value, 1}).ok());
  EXPECT_TRUE(std::isnan(value));
}

TEST(ProcessProbe, RssMatchesVmRss) {
  auto probe = make_process_probe();
  ASSERT_TRUE(probe->open().ok());
  double rss = 0;
  ASSERT_TRUE(probe->sample({&rss, 1}).ok());
  EXPECT_GT(rss, 1 * kMiB);
  EXPECT_NEAR(rss, status_field_bytes("VmRSS"), 2 * kMiB);
}

TEST(ProcessProbe, PeakSeesFreedMemoryAndResetRestartsIt) {
  auto probe = make_process_probe();
  ASSERT_TRUE(probe->open().ok());
  const ProbeStatus reset = probe->reset_peaks();
  if (!reset.ok()) GTEST_SKIP() << reset.error;  // e.g. a sandbox refusing clear_refs
  double rss_before = 0, peak_before = 0;
  ASSERT_TRUE(probe->sample({&rss_before, 1}).ok());
  ASSERT_TRUE(probe->read_peaks({&peak_before, 1}).ok());
  EXPECT_LT(peak_before, rss_before + 8 * kMiB);  // the reset brought VmHWM down to RSS

  const std::size_t size = 64u << 20;
  void* block = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(block, MAP_FAILED);
  std::memset(block, 0x5a, size);  // touch every page
  double rss_touched = 0;
  ASSERT_TRUE(probe->sample({&rss_touched, 1}).ok());
  EXPECT_GE(rss_touched, rss_before + 63 * kMiB);
  ASSERT_EQ(::munmap(block, size), 0);

  double rss_after = 0, peak_after = 0;
  ASSERT_TRUE(probe->sample({&rss_after, 1}).ok());
  ASSERT_TRUE(probe->read_peaks({&peak_after, 1}).ok());
  EXPECT_LT(rss_after, rss_before + 16 * kMiB);   // RSS dropped back
  EXPECT_GE(peak_after, rss_before + 63 * kMiB);  // the exact peak kept the 64 MiB

  ASSERT_TRUE(probe->reset_peaks().ok());
  double peak_reset = 0;
  ASSERT_TRUE(probe->read_peaks({&peak_reset, 1}).ok());
  EXPECT_LT(peak_reset, peak_after - 32 * kMiB);  // the reset forgot it
}

TEST(ProcessProbe, SamplerAndMonitorThreadsMayCallConcurrently) {
  auto probe = make_process_probe();
  ASSERT_TRUE(probe->open().ok());
  int failures = 0;
  std::thread sampler([&] {
    for (int k = 0; k < 2000; ++k) {
      double rss = 0;
      if (!probe->sample({&rss, 1}).ok() || !(rss > 0)) ++failures;
    }
  });
  int boundary_failures = 0;
  for (int k = 0; k < 200; ++k) {
    double peak = 0;
    const bool reset_ok = probe->reset_peaks().ok();
    if (!probe->read_peaks({&peak, 1}).ok() || (reset_ok && !(peak > 0))) ++boundary_failures;
  }
  sampler.join();
  EXPECT_EQ(failures, 0);
  EXPECT_EQ(boundary_failures, 0);
}

std::string write_temp(const std::string& name, const std::string& text) {
  const char* tmp = std::getenv("GENSCOPE_TEST_TMP");
  const std::string dir = tmp && *tmp ? tmp : "/tmp";
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/probes_" + std::to_string(::getpid()) + "_" + name;
  std::ofstream(path) << text;
  return path;
}

TEST(ProcessProbe, MissingClearRefsMeansNoExactPeakAndAClearError) {
  detail::ProcessProbePaths paths;
  paths.clear_refs = "/nonexistent/clear_refs";
  auto probe = detail::make_process_probe(paths);
  ASSERT_TRUE(probe->open().ok());  // RSS sampling still works
  double value = 0;
  EXPECT_TRUE(probe->sample({&value, 1}).ok());
  EXPECT_GT(value, 0);
  const std::string expected =
      "VmHWM reset refused: No such file or directory; peaks fall back to sampling";
  EXPECT_EQ(probe->reset_peaks().error, expected);
  EXPECT_EQ(probe->reset_peaks().error, expected);  // every time
  EXPECT_TRUE(probe->read_peaks({&value, 1}).ok());
  EXPECT_TRUE(std::isnan(value));  // a VmHWM that cannot be reset is not the step's peak
}

TEST(ProcessProbe, RefusedResetWriteIsReportedEveryTime) {
  detail::ProcessProbePaths paths;
  paths.clear_refs = "/dev/full";  // opens for writing, refuses every write (ENOSPC)
  auto probe = detail::make_process_probe(paths);
  ASSERT_TRUE(probe->open().ok());
  double peak = 0;
  EXPECT_TRUE(probe->read_peaks({&peak, 1}).ok());
  EXPECT_GT(peak, 0);  // not refused yet: VmHWM is read
  const std::string expected =
      "VmHWM reset refused: No space left on device; peaks fall back to sampling";
  EXPECT_EQ(probe->reset_peaks().error, expected);
  EXPECT_EQ(probe->reset_peaks().error, expected);
  EXPECT_TRUE(probe->read_peaks({&peak, 1}).ok());
  EXPECT_TRUE(std::isnan(peak));
}

TEST(ProcessProbe, MalformedProcFilesGiveNamedErrors) {
  detail::ProcessProbePaths paths;
  const std::string statm = write_temp("statm", "garbage\n");
  const std::string status = write_temp("status", "Name:\tx\nVmRSS:\t 10 kB\n");
  paths.statm = statm.c_str();
  paths.status = status.c_str();
  auto probe = detail::make_process_probe(paths);
  ASSERT_TRUE(probe->open().ok());
  double value = 0;
  EXPECT_EQ(probe->sample({&value, 1}).error, statm + ": unexpected content");
  EXPECT_TRUE(std::isnan(value));
  EXPECT_EQ(probe->read_peaks({&value, 1}).error, status + ": no VmHWM line");
  EXPECT_TRUE(std::isnan(value));
  paths.statm = "/nonexistent/statm";
  EXPECT_EQ(detail::make_process_probe(paths)->open().error,
            "process probe: cannot open /nonexistent/statm: No such file or directory");
}

TEST(SystemProbe, ParsesAMeminfoFileAndNamesAMissingLine) {
  const std::string good =
      write_temp("meminfo", "MemTotal:       1000 kB\nMemFree:  1 kB\nMemAvailable:   250 kB\n");
  auto probe = detail::make_system_probe(good.c_str());
  ASSERT_TRUE(probe->open().ok());
  double v[4] = {};
  ASSERT_TRUE(probe->sample(v).ok());
  EXPECT_EQ(v[0], 1000 * 1024.0);
  EXPECT_EQ(v[1], 250 * 1024.0);
  EXPECT_EQ(v[2], 750 * 1024.0);
  EXPECT_EQ(v[3], 75.0);
  const std::string bad = write_temp("meminfo_old", "MemTotal:       1000 kB\nMemFree: 1 kB\n");
  probe = detail::make_system_probe(bad.c_str());
  ASSERT_TRUE(probe->open().ok());
  EXPECT_EQ(probe->sample(v).error, bad + ": no MemAvailable line");
  EXPECT_EQ(v[0], 1000 * 1024.0);  // what could be read is kept
  EXPECT_TRUE(std::isnan(v[1]) && std::isnan(v[2]) && std::isnan(v[3]));
}

TEST(SystemProbe, ValuesAreSaneAndConsistent) {
  auto probe = make_system_probe();
  EXPECT_EQ(probe->name(), "system");
  ASSERT_EQ(probe->metrics().size(), 4u);
  EXPECT_EQ(probe->metrics()[0].name, "system.total_bytes");
  EXPECT_EQ(probe->metrics()[1].name, "system.available_bytes");
  EXPECT_EQ(probe->metrics()[2].name, "system.used_bytes");
  EXPECT_EQ(probe->metrics()[3].name, "system.used_percent");
  EXPECT_EQ(probe->metrics()[3].unit, Unit::kPercent);
  ASSERT_TRUE(probe->open().ok());
  double v[4] = {};
  ASSERT_TRUE(probe->sample(v).ok());
  const double phys = double(::sysconf(_SC_PHYS_PAGES)) * double(::sysconf(_SC_PAGESIZE));
  EXPECT_EQ(v[0], phys);  // MemTotal is the kernel's totalram, as is _SC_PHYS_PAGES
  EXPECT_GT(v[1], 0);
  EXPECT_LE(v[1], v[0]);
  EXPECT_EQ(v[2], v[0] - v[1]);
  EXPECT_NEAR(v[3], 100.0 * v[2] / v[0], 1e-9);
  EXPECT_GT(v[3], 0);
  EXPECT_LT(v[3], 100);
}

// A test double for an integration's allocator.
class FakeSource : public AllocatorSource {
 public:
  enum class Mode { kOk, kFalse, kThrowStd, kThrowInt };
  std::string device() const override {
    if (throw_in_device_) throw std::runtime_error("no device");
    return "cuda:0";
  }
  bool read(AllocatorFigures& out, std::string& error) override {
    ++reads_;
    if (mode_ == Mode::kFalse) return error = "allocator not initialised", false;
    if (mode_ == Mode::kThrowStd) throw std::runtime_error("CUDA error: device lost");
    if (mode_ == Mode::kThrowInt) throw 42;
    out = figures_;
    return true;
  }
  bool reset_peaks(std::string& error) override {
    if (mode_ == Mode::kFalse) return error = "reset refused", false;
    if (mode_ == Mode::kThrowStd) throw std::runtime_error("reset exploded");
    if (mode_ == Mode::kThrowInt) throw 7;
    ++resets_;
    figures_.peak_allocated_bytes = figures_.allocated_bytes;
    figures_.peak_reserved_bytes = figures_.reserved_bytes;
    return true;
  }
  Mode mode_ = Mode::kOk;
  bool throw_in_device_ = false;
  AllocatorFigures figures_{100, 200, 1000, 2000};
  int reads_ = 0, resets_ = 0;
};

TEST(AllocatorProbe, ReportsFiguresPeaksAndResets) {
  auto source = std::make_shared<FakeSource>();
  auto probe = make_allocator_probe(source);
  EXPECT_EQ(probe->name(), "allocator");
  ASSERT_EQ(probe->metrics().size(), 2u);
  EXPECT_EQ(probe->metrics()[0].name, "alloc.cuda:0.allocated_bytes");
  EXPECT_EQ(probe->metrics()[1].name, "alloc.cuda:0.reserved_bytes");
  EXPECT_TRUE(probe->metrics()[0].exact_peak);
  EXPECT_TRUE(probe->metrics()[1].exact_peak);
  ASSERT_TRUE(probe->open().ok());
  double v[2] = {};
  ASSERT_TRUE(probe->sample(v).ok());
  EXPECT_EQ(v[0], 100);
  EXPECT_EQ(v[1], 200);
  ASSERT_TRUE(probe->read_peaks(v).ok());
  EXPECT_EQ(v[0], 1000);
  EXPECT_EQ(v[1], 2000);
  ASSERT_TRUE(probe->reset_peaks().ok());
  EXPECT_EQ(source->resets_, 1);
  ASSERT_TRUE(probe->read_peaks(v).ok());
  EXPECT_EQ(v[0], 100);
  EXPECT_EQ(v[1], 200);
}

TEST(AllocatorProbe, SourceFailuresBecomeStatusesAndNaN) {
  auto source = std::make_shared<FakeSource>();
  auto probe = make_allocator_probe(source);
  ASSERT_TRUE(probe->open().ok());
  double v[2] = {1, 1};
  source->mode_ = FakeSource::Mode::kFalse;
  ProbeStatus s = probe->sample(v);
  EXPECT_NE(s.error.find("allocator not initialised"), std::string::npos) << s.error;
  EXPECT_TRUE(std::isnan(v[0]) && std::isnan(v[1]));
  s = probe->reset_peaks();
  EXPECT_NE(s.error.find("reset refused"), std::string::npos) << s.error;

  source->mode_ = FakeSource::Mode::kThrowStd;
  v[0] = v[1] = 1;
  s = probe->read_peaks(v);
  EXPECT_NE(s.error.find("CUDA error: device lost"), std::string::npos) << s.error;
  EXPECT_TRUE(std::isnan(v[0]) && std::isnan(v[1]));
  s = probe->reset_peaks();
  EXPECT_NE(s.error.find("reset exploded"), std::string::npos) << s.error;

  source->mode_ = FakeSource::Mode::kThrowInt;
  EXPECT_NE(probe->sample(v).error.find("non-standard exception"), std::string::npos);
  EXPECT_NE(probe->reset_peaks().error.find("non-standard exception"), std::string::npos);

  source->mode_ = FakeSource::Mode::kOk;  // recovers
  EXPECT_TRUE(probe->sample(v).ok());
  EXPECT_EQ(v[0], 100);
}

TEST(AllocatorProbe, ThrowingDeviceIsAnOpenError) {
  auto source = std::make_shared<FakeSource>();
  source->throw_in_device_ = true;
  auto probe = make_allocator_probe(source);
  EXPECT_EQ(probe->metrics()[0].name, "alloc.unknown.allocated_bytes");
  const ProbeStatus s = probe->open();
  EXPECT_NE(s.error.find("no device"), std::string::npos) << s.error;
}

TEST(HostInfo, DescribesThisMachine) {
  const HostInfo host = read_host_info();
  char name[256] = {};
  ASSERT_EQ(::gethostname(name, sizeof name - 1), 0);
  EXPECT_EQ(host.hostname, name);
  EXPECT_EQ(host.cpu_cores, ::sysconf(_SC_NPROCESSORS_ONLN));
  EXPECT_EQ(host.ram_bytes, double(::sysconf(_SC_PHYS_PAGES)) * double(::sysconf(_SC_PAGESIZE)));
  EXPECT_EQ(host.os.rfind("Linux ", 0), 0u) << host.os;
  EXPECT_FALSE(host.cpu_model.empty());
}

}  // namespace
}  // namespace genscope
