// The NVML probe: per-GPU memory, utilisation, temperature, power, clocks and this
// process's GPU memory, read through libnvidia-ml loaded at run time with dlopen.
//
// Library: $GENSCOPE_NVML_LIBRARY, else the path given to make_nvml_probe(), else
// "libnvidia-ml.so.1". The library is never dlclose'd: a driver call may still be in
// flight on a monitor worker thread that timed out, and unmapping its code under it would
// crash the process. nvmlShutdown() is called when the probe is destroyed.
//
// Per device i (NVML index), in this order:
//   gpu<i>.total_bytes  used_bytes  free_bytes  reserved_bytes      nvmlDeviceGetMemoryInfo_v2
//   gpu<i>.utilization_percent  memory_utilization_percent          nvmlDeviceGetUtilizationRates
//   gpu<i>.temperature_celsius                                      nvmlDeviceGetTemperature
//   gpu<i>.power_watts            (mW / 1000, a ~1 s average)       nvmlDeviceGetPowerUsage
//   gpu<i>.sm_clock_hertz  memory_clock_hertz   (MHz × 1e6)         nvmlDeviceGetClockInfo
//   gpu<i>.process_used_bytes     (this pid)   nvmlDeviceGetComputeRunningProcesses_v3
#include <dlfcn.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <limits>
#include <mutex>
#include <thread>
#include <type_traits>

#include "genscope/probe.hpp"
#include "probes/nvml_api.hpp"

namespace genscope {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr const char* kDefaultLibrary = "libnvidia-ml.so.1";
// How long sample() waits for a concurrent sample() before giving up (a hung driver call).
constexpr std::chrono::milliseconds kBusyWait{100};

// One NVML call per figure group; a group that answered NOT_SUPPORTED once is reported
// once and then no longer queried (it will not start working mid-run).
enum Call : unsigned {
  kMemory,
  kUtilization,
  kTemperature,
  kPower,
  kSmClock,
  kMemClock,
  kProcesses,
  kCallCount
};
constexpr const char* kCallNames[kCallCount] = {"nvmlDeviceGetMemoryInfo_v2",
                                                "nvmlDeviceGetUtilizationRates",
                                                "nvmlDeviceGetTemperature",
                                                "nvmlDeviceGetPowerUsage",
                                                "nvmlDeviceGetClockInfo(SM)",
                                                "nvmlDeviceGetClockInfo(MEM)",
                                                "nvmlDeviceGetComputeRunningProcesses_v3"};

constexpr const char* kFigureNames[] = {
    "total_bytes",         "used_bytes",          "free_bytes",
    "reserved_bytes",      "utilization_percent", "memory_utilization_percent",
    "temperature_celsius", "power_watts",         "sm_clock_hertz",
    "memory_clock_hertz",  "process_used_bytes"};
constexpr Unit kFigureUnits[] = {Unit::kBytes,   Unit::kBytes,   Unit::kBytes,   Unit::kBytes,
                                 Unit::kPercent, Unit::kPercent, Unit::kCelsius, Unit::kWatts,
                                 Unit::kHertz,   Unit::kHertz,   Unit::kBytes};
constexpr std::size_t kFiguresPerDevice = std::size(kFigureNames);

struct NvmlApi {
  PFN_nvmlInit_v2 init = nullptr;
  PFN_nvmlShutdown shutdown = nullptr;
  PFN_nvmlErrorString error_string = nullptr;
  PFN_nvmlDeviceGetCount_v2 get_count = nullptr;
  PFN_nvmlDeviceGetHandleByIndex_v2 get_handle = nullptr;
  PFN_nvmlDeviceGetName get_name = nullptr;
  PFN_nvmlDeviceGetUUID get_uuid = nullptr;
  PFN_nvmlSystemGetDriverVersion get_driver_version = nullptr;
  PFN_nvmlDeviceGetMemoryInfo get_memory = nullptr;
  PFN_nvmlDeviceGetMemoryInfo_v2 get_memory_v2 = nullptr;  // optional: older drivers
  PFN_nvmlDeviceGetUtilizationRates get_utilization = nullptr;
  PFN_nvmlDeviceGetTemperature get_temperature = nullptr;
  PFN_nvmlDeviceGetPowerUsage get_power = nullptr;
  PFN_nvmlDeviceGetClockInfo get_clock = nullptr;
  PFN_nvmlDeviceGetComputeRunningProcesses_v3 get_processes = nullptr;  // optional
};

struct MemoryFigures {
  double total = kNaN, used = kNaN, free = kNaN, reserved = kNaN;
};

class NvmlProbe final : public Probe {
 public:
  explicit NvmlProbe(std::string library_path) : library_path_(std::move(library_path)) {}
  ~NvmlProbe() override {
    if (initialized_) api_.shutdown();
  }

  std::string name() const override { return "nvml"; }
  const std::vector<MetricInfo>& metrics() const override { return metrics_; }
  bool may_block() const override { return true; }
  std::vector<GpuInfo> gpus() const override { return gpus_; }

  ProbeStatus open() override;
  ProbeStatus sample(std::span<double> out) override;

 private:
  ProbeStatus load_library();
  std::string error_text(nvmlReturn_t rc) const;
  nvmlReturn_t query_memory(nvmlDevice_t device, MemoryFigures& out);
  nvmlReturn_t query_process_bytes(nvmlDevice_t device, double& out);
  void note_failure(std::size_t device, Call call, nvmlReturn_t rc, std::string& errors);

  std::string library_path_;
  NvmlApi api_;
  bool initialized_ = false;
  bool memory_v1_ = false;  // v2 missing or refused: reserved_bytes is NaN
  std::vector<nvmlDevice_t> devices_;
  std::vector<unsigned> device_indices_;
  std::vector<MetricInfo> metrics_;
  std::vector<GpuInfo> gpus_;
  std::mutex mutex_;                       // sample() state below
  std::vector<std::uint8_t> unsupported_;  // [device * kCallCount + call]
  std::vector<nvmlProcessInfo_t> processes_;
  std::string open_errors_;
};

std::string NvmlProbe::error_text(nvmlReturn_t rc) const {
  const char* text = api_.error_string ? api_.error_string(rc) : nullptr;
  return (text && *text) ? std::string(text) : "NVML error " + std::to_string(rc);
}

ProbeStatus NvmlProbe::load_library() {
  std::string path = library_path_;
  if (const char* env = std::getenv("GENSCOPE_NVML_LIBRARY"); env && *env) path = env;
  const bool default_library = path.empty();
  if (default_library) path = kDefaultLibrary;
  library_path_ = path;
  ::dlerror();
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* why = ::dlerror();
    const std::string text = why ? why : "unknown dlopen error";
    // The default library not installed at all is a machine without an NVIDIA driver: the
    // probe is absent. A library named by the user, or one that exists but does not load
    // (wrong architecture, missing dependency), is a failure. glibc builds the message with
    // strerror(ENOENT) of the current locale, so compare with that.
    if (default_library && text.find(std::strerror(ENOENT)) != std::string::npos) {
      return ProbeStatus::not_present("no NVIDIA driver library (" + path + " not found)");
    }
    return ProbeStatus::failure("cannot load NVML library '" + path + "': " + text);
  }
  std::string missing;
  auto resolve = [&](auto& fn, const char* symbol, bool required) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(::dlsym(handle, symbol));
    if (!fn && required) missing += (missing.empty() ? "" : ", ") + std::string(symbol);
  };
  resolve(api_.init, "nvmlInit_v2", true);
  resolve(api_.shutdown, "nvmlShutdown", true);
  resolve(api_.error_string, "nvmlErrorString", true);
  resolve(api_.get_count, "nvmlDeviceGetCount_v2", true);
  resolve(api_.get_handle, "nvmlDeviceGetHandleByIndex_v2", true);
  resolve(api_.get_name, "nvmlDeviceGetName", true);
  resolve(api_.get_uuid, "nvmlDeviceGetUUID", true);
  resolve(api_.get_driver_version, "nvmlSystemGetDriverVersion", true);
  resolve(api_.get_memory, "nvmlDeviceGetMemoryInfo", true);
  resolve(api_.get_memory_v2, "nvmlDeviceGetMemoryInfo_v2", false);
  resolve(api_.get_utilization, "nvmlDeviceGetUtilizationRates", true);
  resolve(api_.get_temperature, "nvmlDeviceGetTemperature", true);
  resolve(api_.get_power, "nvmlDeviceGetPowerUsage", true);
  resolve(api_.get_clock, "nvmlDeviceGetClockInfo", true);
  resolve(api_.get_processes, "nvmlDeviceGetComputeRunningProcesses_v3", false);
  // The handle is deliberately leaked (never dlclose'd), see the file comment.
  if (!missing.empty()) {
    api_ = {};
    return ProbeStatus::failure("NVML library '" + path + "' lacks " + missing);
  }
  memory_v1_ = api_.get_memory_v2 == nullptr;
  return {};
}

ProbeStatus NvmlProbe::open() {
  if (initialized_)
    return devices_.empty() ? ProbeStatus::failure("nvml probe: an earlier open() failed")
                            : ProbeStatus{};
  if (ProbeStatus loaded = load_library(); !loaded.ok()) return loaded;
  if (nvmlReturn_t rc = api_.init(); rc != NVML_SUCCESS) {
    std::string error = "nvmlInit_v2 failed: " + error_text(rc);
    // The library is installed but no NVIDIA kernel driver runs: no GPU on this machine.
    if (rc == NVML_ERROR_DRIVER_NOT_LOADED) return ProbeStatus::not_present(std::move(error));
    return ProbeStatus::failure(std::move(error));
  }
  initialized_ = true;
  unsigned count = 0;
  if (nvmlReturn_t rc = api_.get_count(&count); rc != NVML_SUCCESS)
    return ProbeStatus::failure("nvmlDeviceGetCount_v2 failed: " + error_text(rc));
  if (count == 0) return ProbeStatus::not_present("NVML sees no GPU (nvmlDeviceGetCount_v2 = 0)");

  char driver[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE] = {};
  std::string errors;
  if (nvmlReturn_t rc = api_.get_driver_version(driver, sizeof driver); rc != NVML_SUCCESS)
    errors = "nvmlSystemGetDriverVersion: " + error_text(rc);

  for (unsigned i = 0; i < count; ++i) {
    nvmlDevice_t device = nullptr;
    if (nvmlReturn_t rc = api_.get_handle(i, &device); rc != NVML_SUCCESS) {
      // A device we may not query (permissions, lost GPU) is skipped, not fatal.
      errors += (errors.empty() ? "" : "; ") + std::string("nvmlDeviceGetHandleByIndex_v2(") +
                std::to_string(i) + "): " + error_text(rc);
      continue;
    }
    GpuInfo info;
    info.index = static_cast<int>(i);
    info.driver_version = driver;
    char text[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
    if (api_.get_name(device, text, sizeof text) == NVML_SUCCESS) info.name = text;
    text[0] = '\0';
    if (api_.get_uuid(device, text, sizeof text) == NVML_SUCCESS) info.uuid = text;
    MemoryFigures memory;
    if (query_memory(device, memory) == NVML_SUCCESS) info.total_bytes = memory.total;
    devices_.push_back(device);
    device_indices_.push_back(i);
    gpus_.push_back(std::move(info));
    const std::string prefix = "gpu" + std::to_string(i) + ".";
    for (std::size_t f = 0; f < kFiguresPerDevice; ++f)
      metrics_.push_back({prefix + kFigureNames[f], kFigureUnits[f], false});
  }
  unsupported_.assign(devices_.size() * kCallCount, 0);
  if (devices_.empty()) return ProbeStatus::failure("no usable GPU: " + errors);
  open_errors_ = std::move(errors);  // non-fatal: returned with the first sample
  return {};
}

nvmlReturn_t NvmlProbe::query_memory(nvmlDevice_t device, MemoryFigures& out) {
  if (!memory_v1_) {
    nvmlMemory_v2_t m{};
    m.version = nvmlMemory_v2;
    const nvmlReturn_t rc = api_.get_memory_v2(device, &m);
    if (rc == NVML_SUCCESS) {
      out = {double(m.total), double(m.used), double(m.free), double(m.reserved)};
      return rc;
    }
    if (rc != NVML_ERROR_NOT_SUPPORTED && rc != NVML_ERROR_FUNCTION_NOT_FOUND &&
        rc != NVML_ERROR_ARGUMENT_VERSION_MISMATCH)
      return rc;
    memory_v1_ = true;  // the driver only speaks v1: stop asking for v2
  }
  nvmlMemory_t m{};
  const nvmlReturn_t rc = api_.get_memory(device, &m);
  if (rc == NVML_SUCCESS) out = {double(m.total), double(m.used), double(m.free), kNaN};
  return rc;
}

nvmlReturn_t NvmlProbe::query_process_bytes(nvmlDevice_t device, double& out) {
  if (!api_.get_processes) return NVML_ERROR_FUNCTION_NOT_FOUND;
  unsigned count = 0;
  nvmlReturn_t rc = api_.get_processes(device, &count, nullptr);  // sizes the array
  for (int attempt = 0; rc == NVML_ERROR_INSUFFICIENT_SIZE && attempt < 3; ++attempt) {
    processes_.resize(count + 8);  // slack for processes starting between the calls
    count = static_cast<unsigned>(processes_.size());
    rc = api_.get_processes(device, &count, processes_.data());
  }
  if (rc != NVML_SUCCESS) return rc;
  // NVML lists host PIDs; inside a PID namespace getpid() differs and this reads 0.
  const unsigned self = static_cast<unsigned>(::getpid());
  out = 0;
  for (unsigned k = 0; k < count && k < processes_.size(); ++k) {
    if (processes_[k].pid != self) continue;
    const unsigned long long bytes = processes_[k].usedGpuMemory;
    out = bytes == NVML_VALUE_NOT_AVAILABLE ? kNaN : double(bytes);
    break;
  }
  return NVML_SUCCESS;
}

void NvmlProbe::note_failure(std::size_t device, Call call, nvmlReturn_t rc, std::string& errors) {
  if (!errors.empty()) errors += "; ";
  errors += (call == kMemory && memory_v1_) ? "nvmlDeviceGetMemoryInfo" : kCallNames[call];
  errors += "(gpu" + std::to_string(device_indices_[device]) + "): " + error_text(rc);
  if (rc == NVML_ERROR_NOT_SUPPORTED || rc == NVML_ERROR_FUNCTION_NOT_FOUND) {
    unsupported_[device * kCallCount + call] = 1;
    errors += " (no longer queried)";
  }
}

ProbeStatus NvmlProbe::sample(std::span<double> out) {
  for (double& v : out) v = kNaN;
  if (!initialized_ || devices_.empty()) return ProbeStatus::failure("nvml probe: not open");
  // Concurrent callers (sampler and step boundary) wait their turn, but not behind a call
  // the driver never returns from: that would pile up the monitor's worker threads.
  // Polled try_lock rather than timed_mutex::try_lock_for: the latter goes through
  // pthread_mutex_clocklock, which ThreadSanitizer (GCC 12) does not intercept.
  std::unique_lock lock(mutex_, std::defer_lock);
  const auto give_up = std::chrono::steady_clock::now() + kBusyWait;
  while (!lock.try_lock()) {
    if (std::chrono::steady_clock::now() >= give_up)
      return ProbeStatus::failure("nvml probe: an earlier sample() is still in the driver");
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::string errors = std::move(open_errors_);
  open_errors_.clear();
  for (std::size_t d = 0; d < devices_.size(); ++d) {
    nvmlDevice_t device = devices_[d];
    double* v = out.data() + d * kFiguresPerDevice;
    const std::uint8_t* skip = &unsupported_[d * kCallCount];
    if (!skip[kMemory]) {
      MemoryFigures m;
      if (nvmlReturn_t rc = query_memory(device, m); rc == NVML_SUCCESS) {
        v[0] = m.total, v[1] = m.used, v[2] = m.free, v[3] = m.reserved;
      } else {
        note_failure(d, kMemory, rc, errors);
      }
    }
    if (!skip[kUtilization]) {
      nvmlUtilization_t u{};
      if (nvmlReturn_t rc = api_.get_utilization(device, &u); rc == NVML_SUCCESS) {
        v[4] = u.gpu, v[5] = u.memory;
      } else {
        note_failure(d, kUtilization, rc, errors);
      }
    }
    unsigned value = 0;
    if (!skip[kTemperature]) {
      if (nvmlReturn_t rc = api_.get_temperature(device, NVML_TEMPERATURE_GPU, &value);
          rc == NVML_SUCCESS)
        v[6] = value;
      else
        note_failure(d, kTemperature, rc, errors);
    }
    if (!skip[kPower]) {
      if (nvmlReturn_t rc = api_.get_power(device, &value); rc == NVML_SUCCESS)
        v[7] = value / 1000.0;
      else
        note_failure(d, kPower, rc, errors);
    }
    if (!skip[kSmClock]) {
      if (nvmlReturn_t rc = api_.get_clock(device, NVML_CLOCK_SM, &value); rc == NVML_SUCCESS)
        v[8] = value * 1e6;
      else
        note_failure(d, kSmClock, rc, errors);
    }
    if (!skip[kMemClock]) {
      if (nvmlReturn_t rc = api_.get_clock(device, NVML_CLOCK_MEM, &value); rc == NVML_SUCCESS)
        v[9] = value * 1e6;
      else
        note_failure(d, kMemClock, rc, errors);
    }
    if (!skip[kProcesses]) {
      if (nvmlReturn_t rc = query_process_bytes(device, v[10]); rc != NVML_SUCCESS) {
        v[10] = kNaN;
        note_failure(d, kProcesses, rc, errors);
      }
    }
  }
  return errors.empty() ? ProbeStatus{} : ProbeStatus::failure(std::move(errors));
}

}  // namespace

std::unique_ptr<Probe> make_nvml_probe(std::string library_path) {
  return std::make_unique<NvmlProbe>(std::move(library_path));
}

}  // namespace genscope
