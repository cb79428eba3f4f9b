// Tests of the NVML probe through the fake NVML library (tests/fake_nvml), which answers
// from a JSON scenario written by each test.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "genscope/probe.hpp"

namespace genscope {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr std::size_t kPerDevice = 11;
// Figure offsets inside one device's block.
enum { kTotal, kUsed, kFree, kReserved, kUtil, kMemUtil, kTemp, kPower, kSm, kMem, kProc };

nlohmann::json device(const std::string& name, double total_gib) {
  return {{"name", name},
          {"uuid", "GPU-" + name},
          {"total", static_cast<unsigned long long>(total_gib * kGiB)},
          {"reserved", 512ULL << 20},
          {"used", {1ULL << 30, 2ULL << 30, 3ULL << 30}},
          {"utilization", {{"gpu", 42}, {"memory", 17}}},
          {"temperature", 55},
          {"power_mw", 251500},
          {"clocks", {{"sm", 1980}, {"mem", 2619}}},
          {"processes", nlohmann::json::array(
                            {{{"pid", 1}, {"used", 5}}, {{"pid", "self"}, {"used", 123456789}}})}};
}

nlohmann::json scenario() {
  return {{"driver_version", "550.54.15"}, {"devices", {device("Fake H100", 80)}}};
}

class NvmlProbeTest : public ::testing::Test {
 protected:
  void SetUp() override { ::unsetenv("GENSCOPE_NVML_LIBRARY"); }
  void TearDown() override { ::unsetenv("GENSCOPE_FAKE_NVML_SCENARIO"); }

  // Writes `j` as this test's scenario and points the fake at it.
  void use(const nlohmann::json& j) {
    const char* tmp = std::getenv("GENSCOPE_TEST_TMP");
    std::string dir = tmp && *tmp ? tmp : "/tmp";
    std::filesystem::create_directories(dir);
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = dir + "/nvml_" + info->name() + "_" + std::to_string(::getpid()) + ".json";
    std::ofstream(path_) << j.dump();
    ::setenv("GENSCOPE_FAKE_NVML_SCENARIO", path_.c_str(), 1);
  }

  std::unique_ptr<Probe> open_ok(const nlohmann::json& j) {
    use(j);
    auto probe = make_nvml_probe(GENSCOPE_FAKE_NVML);
    const ProbeStatus status = probe->open();
    EXPECT_TRUE(status.ok()) << status.error;
    return probe;
  }

  ProbeStatus open_status(const nlohmann::json& j, std::string library = GENSCOPE_FAKE_NVML) {
    use(j);
    auto probe = make_nvml_probe(std::move(library));
    const ProbeStatus status = probe->open();
    EXPECT_FALSE(status.ok());
    EXPECT_TRUE(probe->metrics().empty());
    return status;
  }

  std::string open_error(const nlohmann::json& j, std::string library = GENSCOPE_FAKE_NVML) {
    return open_status(j, std::move(library)).error;
  }

  std::string path_;
};

TEST_F(NvmlProbeTest, DescribesEveryFigureOfEveryDevice) {
  nlohmann::json j = scenario();
  j["devices"].push_back(device("Fake L4", 24));
  auto probe = open_ok(j);
  EXPECT_EQ(probe->name(), "nvml");
  EXPECT_TRUE(probe->may_block());
  const auto& m = probe->metrics();
  ASSERT_EQ(m.size(), 2 * kPerDevice);
  const char* names[] = {"total_bytes",         "used_bytes",          "free_bytes",
                         "reserved_bytes",      "utilization_percent", "memory_utilization_percent",
                         "temperature_celsius", "power_watts",         "sm_clock_hertz",
                         "memory_clock_hertz",  "process_used_bytes"};
  const Unit units[] = {Unit::kBytes,   Unit::kBytes,   Unit::kBytes,   Unit::kBytes,
                        Unit::kPercent, Unit::kPercent, Unit::kCelsius, Unit::kWatts,
                        Unit::kHertz,   Unit::kHertz,   Unit::kBytes};
  for (std::size_t d = 0; d < 2; ++d) {
    for (std::size_t f = 0; f < kPerDevice; ++f) {
      EXPECT_EQ(m[d * kPerDevice + f].name, "gpu" + std::to_string(d) + "." + names[f]);
      EXPECT_EQ(m[d * kPerDevice + f].unit, units[f]);
      EXPECT_FALSE(m[d * kPerDevice + f].exact_peak);
    }
  }
  const std::vector<GpuInfo> gpus = probe->gpus();
  ASSERT_EQ(gpus.size(), 2u);
  EXPECT_EQ(gpus[1].index, 1);
  EXPECT_EQ(gpus[1].name, "Fake L4");
  EXPECT_EQ(gpus[1].uuid, "GPU-Fake L4");
  EXPECT_EQ(gpus[1].driver_version, "550.54.15");
  EXPECT_EQ(gpus[1].total_bytes, 24 * kGiB);
  EXPECT_EQ(gpus[0].total_bytes, 80 * kGiB);
}

TEST_F(NvmlProbeTest, SamplesEveryFigureWithUnitConversions) {
  auto probe = open_ok(scenario());
  std::vector<double> v(kPerDevice);
  // open() queried memory once for total_bytes, so the first sample sees used[1].
  ASSERT_TRUE(probe->sample(v).ok());
  EXPECT_EQ(v[kTotal], 80 * kGiB);
  EXPECT_EQ(v[kUsed], 2 * kGiB);
  EXPECT_EQ(v[kFree], 78 * kGiB);
  EXPECT_EQ(v[kReserved], 512.0 * 1024 * 1024);
  EXPECT_EQ(v[kUtil], 42);
  EXPECT_EQ(v[kMemUtil], 17);
  EXPECT_EQ(v[kTemp], 55);
  EXPECT_EQ(v[kPower], 251.5);
  EXPECT_EQ(v[kSm], 1980e6);
  EXPECT_EQ(v[kMem], 2619e6);
  EXPECT_EQ(v[kProc], 123456789);  // our pid's entry, not pid 1's
  ASSERT_TRUE(probe->sample(v).ok());
  EXPECT_EQ(v[kUsed], 3 * kGiB);
  ASSERT_TRUE(probe->sample(v).ok());
  EXPECT_EQ(v[kUsed], 3 * kGiB);  // the last value repeats
  EXPECT_EQ(v[kFree], 77 * kGiB);
}

TEST_F(NvmlProbeTest, ProcessMemoryIsZeroWhenThisProcessIsNotListed) {
  nlohmann::json j = scenario();
  j["devices"][0]["processes"] = nlohmann::json::array({{{"pid", 1}, {"used", 5}}});
  auto probe = open_ok(j);
  std::vector<double> v(kPerDevice);
  ASSERT_TRUE(probe->sample(v).ok());
  EXPECT_EQ(v[kProc], 0);
  j["devices"][0]["processes"] = nlohmann::json::array();
  probe = open_ok(j);
  ASSERT_TRUE(probe->sample(v).ok());
  EXPECT_EQ(v[kProc], 0);
}

TEST_F(NvmlProbeTest, ManyProcessesAreSizedThenFound) {
  nlohmann::json j = scenario();
  auto procs = nlohmann::json::array();
  for (int k = 0; k < 40; ++k) procs.push_back({{"pid", 100000 + k}, {"used", k}});
  procs.push_back({{"pid", "self"}, {"used", 777}});
  j["devices"][0]["processes"] = procs;
  auto probe = open_ok(j);
  std::vector<double> v(kPerDevice);
  ASSERT_TRUE(probe->sample(v).ok());
  EXPECT_EQ(v[kProc], 777);
}

TEST_F(NvmlProbeTest, FallsBackToMemoryInfoV1) {
  nlohmann::json j = scenario();
  j["no_v2"] = true;
  auto probe = open_ok(j);
  EXPECT_EQ(probe->gpus()[0].total_bytes, 80 * kGiB);
  std::vector<double> v(kPerDevice);
  const ProbeStatus s = probe->sample(v);
  EXPECT_TRUE(s.ok()) << s.error;  // the fallback is silent
  EXPECT_EQ(v[kTotal], 80 * kGiB);
  EXPECT_EQ(v[kUsed], 2 * kGiB);
  EXPECT_EQ(v[kFree], 78 * kGiB);
  EXPECT_TRUE(std::isnan(v[kReserved]));  // v1 has no reserved figure
  EXPECT_EQ(v[kUtil], 42);
}

TEST_F(NvmlProbeTest, MissingLibraryIsAClearOpenError) {
  const ProbeStatus status = open_status(scenario(), "/nonexistent/libnvidia-ml.so.1");
  EXPECT_NE(status.error.find("cannot load NVML library '/nonexistent/libnvidia-ml.so.1'"),
            std::string::npos)
      << status.error;
  EXPECT_FALSE(status.absent);  // a library the user named is expected to be there
}

TEST_F(NvmlProbeTest, DefaultLibraryNotInstalledIsAbsentNotFailed) {
  if (void* h = ::dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL)) {
    ::dlclose(h);
    GTEST_SKIP() << "this machine has libnvidia-ml.so.1";
  }
  auto probe = make_nvml_probe();
  const ProbeStatus status = probe->open();
  EXPECT_TRUE(status.absent);
  EXPECT_EQ(status.error, "no NVIDIA driver library (libnvidia-ml.so.1 not found)");
}

TEST_F(NvmlProbeTest, LibraryWithoutNvmlSymbolsIsAClearOpenError) {
  const std::string error = open_error(scenario(), "libm.so.6");
  EXPECT_NE(error.find("lacks nvmlInit_v2"), std::string::npos) << error;
}

TEST_F(NvmlProbeTest, EnvironmentOverridesTheLibraryPath) {
  use(scenario());
  ::setenv("GENSCOPE_NVML_LIBRARY", GENSCOPE_FAKE_NVML, 1);
  auto probe = make_nvml_probe("/nonexistent/libnvidia-ml.so.1");
  const ProbeStatus s = probe->open();
  EXPECT_TRUE(s.ok()) << s.error;
  EXPECT_EQ(probe->gpus().size(), 1u);
}

TEST_F(NvmlProbeTest, InitFailureIsAClearOpenError) {
  nlohmann::json j = scenario();
  j["errors"] = {{"nvmlInit_v2", 9}};  // NVML_ERROR_DRIVER_NOT_LOADED: no GPU here
  const ProbeStatus status = open_status(j);
  EXPECT_EQ(status.error, "nvmlInit_v2 failed: Driver Not Loaded");
  EXPECT_TRUE(status.absent);
  ::unsetenv("GENSCOPE_FAKE_NVML_SCENARIO");  // the fake's "no driver" default
  auto probe = make_nvml_probe(GENSCOPE_FAKE_NVML);
  EXPECT_EQ(probe->open().error, "nvmlInit_v2 failed: Driver Not Loaded");
  j["errors"] = {{"nvmlInit_v2", 999}};  // any other failure is a failure
  EXPECT_FALSE(open_status(j).absent);
}

TEST_F(NvmlProbeTest, NoDeviceIsAClearOpenError) {
  nlohmann::json j = scenario();
  j["devices"] = nlohmann::json::array();
  const ProbeStatus none = open_status(j);
  EXPECT_NE(none.error.find("NVML sees no GPU"), std::string::npos);
  EXPECT_TRUE(none.absent);
  j = scenario();
  j["errors"] = {{"nvmlDeviceGetCount_v2", 999}};
  const ProbeStatus failed = open_status(j);
  EXPECT_EQ(failed.error, "nvmlDeviceGetCount_v2 failed: Unknown Error");
  EXPECT_FALSE(failed.absent);
}

TEST_F(NvmlProbeTest, FailingCallGivesNaNForItsFigureOnly) {
  nlohmann::json j = scenario();
  j["errors"] = {{"nvmlDeviceGetPowerUsage", 15}};  // NVML_ERROR_GPU_IS_LOST
  auto probe = open_ok(j);
  std::vector<double> v(kPerDevice);
  for (int round = 0; round < 2; ++round) {  // a transient-looking error is retried
    const ProbeStatus s = probe->sample(v);
    EXPECT_EQ(s.error, "nvmlDeviceGetPowerUsage(gpu0): GPU is lost");
    EXPECT_TRUE(std::isnan(v[kPower]));
    EXPECT_EQ(v[kTemp], 55);
    EXPECT_EQ(v[kSm], 1980e6);
    EXPECT_EQ(v[kProc], 123456789);
  }
}

TEST_F(NvmlProbeTest, UnsupportedCallIsReportedOnceThenSkipped) {
  nlohmann::json j = scenario();
  j["errors"] = {{"nvmlDeviceGetComputeRunningProcesses_v3", 3},  // NOT_SUPPORTED
                 {"nvmlDeviceGetClockInfo", 3}};
  auto probe = open_ok(j);
  std::vector<double> v(kPerDevice);
  ProbeStatus s = probe->sample(v);
  EXPECT_NE(s.error.find("nvmlDeviceGetComputeRunningProcesses_v3(gpu0): Not Supported"),
            std::string::npos)
      << s.error;
  EXPECT_NE(s.error.find("nvmlDeviceGetClockInfo(SM)(gpu0): Not Supported"), std::string::npos);
  EXPECT_NE(s.error.find("nvmlDeviceGetClockInfo(MEM)(gpu0): Not Supported"), std::string::npos);
  EXPECT_TRUE(std::isnan(v[kProc]) && std::isnan(v[kSm]) && std::isnan(v[kMem]));
  s = probe->sample(v);
  EXPECT_TRUE(s.ok()) << s.error;
  EXPECT_TRUE(std::isnan(v[kProc]) && std::isnan(v[kSm]) && std::isnan(v[kMem]));
  EXPECT_EQ(v[kUtil], 42);
}

TEST_F(NvmlProbeTest, MemoryErrorOtherThanUnsupportedDoesNotFallBack) {
  nlohmann::json j = scenario();
  j["errors"] = {{"nvmlDeviceGetMemoryInfo_v2", 15}};
  auto probe = open_ok(j);
  EXPECT_EQ(probe->gpus()[0].total_bytes, 0);  // unknown at open
  std::vector<double> v(kPerDevice);
  const ProbeStatus s = probe->sample(v);
  EXPECT_EQ(s.error, "nvmlDeviceGetMemoryInfo_v2(gpu0): GPU is lost");
  for (int f : {kTotal, kUsed, kFree, kReserved}) EXPECT_TRUE(std::isnan(v[f]));
  EXPECT_EQ(v[kUtil], 42);
}

TEST_F(NvmlProbeTest, HangingCallDelaysTheSampleButCompletes) {
  nlohmann::json j = scenario();
  j["hangs"] = {{"nvmlDeviceGetUtilizationRates", 150}};
  auto probe = open_ok(j);
  std::vector<double> v(kPerDevice);
  const auto start = std::chrono::steady_clock::now();
  const ProbeStatus s = probe->sample(v);
  const auto elapsed = std::chrono::steady_clock::now() - start;
  EXPECT_TRUE(s.ok()) << s.error;
  EXPECT_GE(elapsed, std::chrono::milliseconds(150));
  EXPECT_LT(elapsed, std::chrono::milliseconds(5000));
  EXPECT_EQ(v[kUtil], 42);
}

TEST_F(NvmlProbeTest, SecondCallerDoesNotQueueBehindAHungCall) {
  nlohmann::json j = scenario();
  j["hangs"] = {{"nvmlDeviceGetTemperature", 300}};
  auto probe = open_ok(j);
  std::vector<double> hung(kPerDevice), second(kPerDevice, 1.0);
  ProbeStatus hung_status;
  std::thread first([&] { hung_status = probe->sample(hung); });
  std::this_thread::sleep_for(std::chrono::milliseconds(60));  // first is in the driver
  const auto start = std::chrono::steady_clock::now();
  const ProbeStatus s = probe->sample(second);
  const auto waited = std::chrono::steady_clock::now() - start;
  first.join();
  // The error (not a late success) shows it gave up before the hang ended.
  EXPECT_EQ(s.error, "nvml probe: an earlier sample() is still in the driver");
  EXPECT_GE(waited, std::chrono::milliseconds(90));   // waited its turn for a while
  EXPECT_TRUE(std::isnan(second[kUtil]));
  EXPECT_TRUE(hung_status.ok()) << hung_status.error;
  EXPECT_EQ(hung[kTemp], 55);
}

TEST_F(NvmlProbeTest, NonFatalOpenErrorsComeWithTheFirstSample) {
  nlohmann::json j = scenario();
  j["errors"] = {{"nvmlSystemGetDriverVersion", 4}};  // NVML_ERROR_NO_PERMISSION
  auto probe = open_ok(j);
  EXPECT_EQ(probe->gpus()[0].driver_version, "");
  std::vector<double> v(kPerDevice);
  EXPECT_EQ(probe->sample(v).error, "nvmlSystemGetDriverVersion: Insufficient Permissions");
  EXPECT_TRUE(probe->sample(v).ok());
  EXPECT_EQ(v[kUtil], 42);
}

TEST_F(NvmlProbeTest, ConcurrentSamplesAreSafe) {
  nlohmann::json j = scenario();
  j["devices"].push_back(device("Fake L4", 24));
  auto probe = open_ok(j);
  auto worker = [&probe](int* bad) {
    std::vector<double> v(2 * kPerDevice);
    for (int k = 0; k < 300; ++k) {
      if (!probe->sample(v).ok() || v[kProc] != 123456789 || v[kPerDevice + kTotal] != 24 * kGiB)
        ++*bad;
    }
  };
  int bad_a = 0, bad_b = 0;
  std::thread a(worker, &bad_a), b(worker, &bad_b);
  a.join();
  b.join();
  EXPECT_EQ(bad_a + bad_b, 0);
}

TEST_F(NvmlProbeTest, SampleBeforeOpenIsAnError) {
  auto probe = make_nvml_probe(GENSCOPE_FAKE_NVML);
  std::vector<double> v(1, 0.0);
  EXPECT_FALSE(probe->sample(v).ok());
}

}  // namespace
}  // namespace genscope
