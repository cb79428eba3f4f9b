// A fake libnvidia-ml for tests: the NVML entry points genscope's nvml probe dlsym's,
// answering from a JSON scenario read at every nvmlInit_v2 from the file named by
// $GENSCOPE_FAKE_NVML_SCENARIO (format: docs/probes.md, "Fake NVML scenario").
//
// {
//   "driver_version": "550.54.15",
//   "no_v2": false,                          // nvmlDeviceGetMemoryInfo_v2 → FUNCTION_NOT_FOUND
//   "errors": {"nvmlDeviceGetPowerUsage": 3},           // call name → nvmlReturn_t
//   "hangs":  {"nvmlDeviceGetUtilizationRates": 200},   // call name → sleep ms, then answer
//   "devices": [{
//     "name": "Fake H100", "uuid": "GPU-…", "total": 85899345920, "reserved": 536870912,
//     "used": [1073741824, 2147483648],      // advanced on every memory query, last repeats
//     "utilization": {"gpu": 42, "memory": 17}, "temperature": 55, "power_mw": 251000,
//     "clocks": {"sm": 1980, "mem": 2619},
//     "processes": [{"pid": "self", "used": 123456789}, {"pid": 1, "used": 5},
//                   {"pid_file": "/tmp/child.pid", "used": 7}]   (re-read at every call)
//   }]
// }
//
// nvmlInit_v2/nvmlShutdown are reference-counted like NVML's. No scenario variable → nvmlInit_v2
// returns DRIVER_NOT_LOADED; an unreadable or invalid scenario → UNKNOWN (with the reason on
// stderr).
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "probes/nvml_api.hpp"

#define FAKE_NVML_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

struct FakeDevice {
  std::string name, uuid;
  unsigned long long total = 0, reserved = 0;
  std::vector<unsigned long long> used{0};
  std::size_t used_index = 0;
  unsigned util_gpu = 0, util_memory = 0, temperature = 0, power_mw = 0;
  unsigned sm_clock_mhz = 0, mem_clock_mhz = 0;
  std::vector<nvmlProcessInfo_t> processes;
  std::vector<std::string> pid_files;  // per process: "" or a file holding its pid
};

// The pid in a pid file ("" = fixed pid); 0 when the file is missing or not a pid.
unsigned pid_from_file(const std::string& path) {
  std::ifstream in(path);
  long long pid = 0;
  if (!(in >> pid) || pid <= 0 || pid > 0x7fffffff) return 0;
  return static_cast<unsigned>(pid);
}

struct Scenario {
  std::string driver_version = "0.0";
  bool no_v2 = false;
  std::map<std::string, int> errors;
  std::map<std::string, int> hangs_ms;
  std::vector<FakeDevice> devices;
};

std::mutex g_mutex;
// Never destroyed: a test abandons a hung call (as the monitor does with a real driver), and
// that thread may still read the scenario while the process runs its static destructors.
Scenario& g_scenario = *new Scenario;
int g_init_count = 0;  // NVML counts nvmlInit_v2/nvmlShutdown pairs; so does the fake

nvmlReturn_t load_scenario(Scenario& out) {
  const char* path = std::getenv("GENSCOPE_FAKE_NVML_SCENARIO");
  if (!path || !*path) return NVML_ERROR_DRIVER_NOT_LOADED;
  try {
    std::ifstream file(path);
    if (!file) throw std::runtime_error("cannot open scenario");
    const nlohmann::json j = nlohmann::json::parse(file);
    Scenario s;
    s.driver_version = j.value("driver_version", "0.0");
    s.no_v2 = j.value("no_v2", false);
    if (j.contains("errors")) s.errors = j["errors"].get<std::map<std::string, int>>();
    if (j.contains("hangs")) s.hangs_ms = j["hangs"].get<std::map<std::string, int>>();
    for (const auto& d : j.value("devices", nlohmann::json::array())) {
      FakeDevice dev;
      dev.name = d.value("name", "Fake GPU");
      dev.uuid = d.value("uuid", "GPU-00000000-0000-0000-0000-000000000000");
      dev.total = d.value("total", 0ULL);
      dev.reserved = d.value("reserved", 0ULL);
      if (d.contains("used")) dev.used = d["used"].get<std::vector<unsigned long long>>();
      if (dev.used.empty()) dev.used.push_back(0);
      if (d.contains("utilization")) {
        dev.util_gpu = d["utilization"].value("gpu", 0u);
        dev.util_memory = d["utilization"].value("memory", 0u);
      }
      dev.temperature = d.value("temperature", 0u);
      dev.power_mw = d.value("power_mw", 0u);
      if (d.contains("clocks")) {
        dev.sm_clock_mhz = d["clocks"].value("sm", 0u);
        dev.mem_clock_mhz = d["clocks"].value("mem", 0u);
      }
      for (const auto& p : d.value("processes", nlohmann::json::array())) {
        nvmlProcessInfo_t info{};
        if (p.contains("pid_file")) {
          dev.pid_files.push_back(p.at("pid_file").get<std::string>());
        } else {
          const auto& pid = p.at("pid");
          info.pid = pid.is_string() && pid.get<std::string>() == "self"
                         ? static_cast<unsigned>(::getpid())
                         : pid.get<unsigned>();
          dev.pid_files.emplace_back();
        }
        info.usedGpuMemory = p.value("used", 0ULL);
        info.gpuInstanceId = info.computeInstanceId = 0xFFFFFFFFu;
        dev.processes.push_back(info);
      }
      s.devices.push_back(std::move(dev));
    }
    out = std::move(s);
    return NVML_SUCCESS;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fake_nvml: scenario %s: %s\n", path, e.what());
    return NVML_ERROR_UNKNOWN;
  }
}

// Sleeps for a configured hang (outside the lock), then returns the configured error for
// `call`, UNINITIALIZED before init, or SUCCESS.
nvmlReturn_t enter(const char* call) {
  int hang_ms = 0;
  nvmlReturn_t rc = NVML_SUCCESS;
  {
    std::lock_guard lock(g_mutex);
    if (g_init_count == 0) return NVML_ERROR_UNINITIALIZED;
    if (auto it = g_scenario.hangs_ms.find(call); it != g_scenario.hangs_ms.end())
      hang_ms = it->second;
    if (auto it = g_scenario.errors.find(call); it != g_scenario.errors.end()) rc = it->second;
  }
  if (hang_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(hang_ms));
  return rc;
}

// The device a handle names (handles are index + 1), or nullptr. Call under g_mutex.
FakeDevice* device_of(nvmlDevice_t handle) {
  const auto index = reinterpret_cast<std::uintptr_t>(handle);
  if (index == 0 || index > g_scenario.devices.size()) return nullptr;
  return &g_scenario.devices[index - 1];
}

nvmlReturn_t copy_text(const std::string& text, char* out, unsigned length) {
  if (!out) return NVML_ERROR_INVALID_ARGUMENT;
  if (text.size() + 1 > length) return NVML_ERROR_INSUFFICIENT_SIZE;
  std::memcpy(out, text.c_str(), text.size() + 1);
  return NVML_SUCCESS;
}

unsigned long long next_used(FakeDevice& dev) {
  const unsigned long long used = dev.used[dev.used_index];
  if (dev.used_index + 1 < dev.used.size()) ++dev.used_index;
  return used;
}

}  // namespace

FAKE_NVML_EXPORT nvmlReturn_t nvmlInit_v2(void) {
  Scenario s;
  nvmlReturn_t rc = load_scenario(s);
  if (rc != NVML_SUCCESS) return rc;
  if (auto it = s.hangs_ms.find("nvmlInit_v2"); it != s.hangs_ms.end())
    std::this_thread::sleep_for(std::chrono::milliseconds(it->second));
  if (auto it = s.errors.find("nvmlInit_v2"); it != s.errors.end()) return it->second;
  std::lock_guard lock(g_mutex);
  g_scenario = std::move(s);  // every init re-reads the scenario (tests switch files)
  ++g_init_count;
  return NVML_SUCCESS;
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlShutdown(void) {
  std::lock_guard lock(g_mutex);
  if (g_init_count == 0) return NVML_ERROR_UNINITIALIZED;
  --g_init_count;
  return NVML_SUCCESS;
}

FAKE_NVML_EXPORT const char* nvmlErrorString(nvmlReturn_t rc) {
  switch (rc) {
    case NVML_SUCCESS:
      return "Success";
    case NVML_ERROR_UNINITIALIZED:
      return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT:
      return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED:
      return "Not Supported";
    case NVML_ERROR_NO_PERMISSION:
      return "Insufficient Permissions";
    case NVML_ERROR_NOT_FOUND:
      return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE:
      return "Insufficient Size";
    case NVML_ERROR_DRIVER_NOT_LOADED:
      return "Driver Not Loaded";
    case NVML_ERROR_TIMEOUT:
      return "Timeout";
    case NVML_ERROR_FUNCTION_NOT_FOUND:
      return "Function Not Found";
    case NVML_ERROR_GPU_IS_LOST:
      return "GPU is lost";
    case NVML_ERROR_ARGUMENT_VERSION_MISMATCH:
      return "Argument version mismatch";
    default:
      return "Unknown Error";
  }
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* count) {
  if (nvmlReturn_t rc = enter("nvmlDeviceGetCount_v2"); rc != NVML_SUCCESS) return rc;
  if (!count) return NVML_ERROR_INVALID_ARGUMENT;
  std::lock_guard lock(g_mutex);
  *count = static_cast<unsigned>(g_scenario.devices.size());
  return NVML_SUCCESS;
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index,
                                                            nvmlDevice_t* device) {
  if (nvmlReturn_t rc = enter("nvmlDeviceGetHandleByIndex_v2"); rc != NVML_SUCCESS) return rc;
  std::lock_guard lock(g_mutex);
  if (!device || index >= g_scenario.devices.size()) return NVML_ERROR_INVALID_ARGUMENT;
  *device = reinterpret_cast<nvmlDevice_t>(static_cast<std::uintptr_t>(index) + 1);
  return NVML_SUCCESS;
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char* name,
                                                unsigned int length) {
  if (nvmlReturn_t rc = enter("nvmlDeviceGetName"); rc != NVML_SUCCESS) return rc;
  std::lock_guard lock(g_mutex);
  FakeDevice* dev = device_of(device);
  return dev ? copy_text(dev->name, name, length) : NVML_ERROR_INVALID_ARGUMENT;
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char* uuid,
                                                unsigned int length) {
  if (nvmlReturn_t rc = enter("nvmlDeviceGetUUID"); rc != NVML_SUCCESS) return rc;
  std::lock_guard lock(g_mutex);
  FakeDevice* dev = device_of(device);
  return dev ? copy_text(dev->uuid, uuid, length) : NVML_ERROR_INVALID_ARGUMENT;
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlSystemGetDriverVersion(char* version, unsigned int length) {
  if (nvmlReturn_t rc = enter("nvmlSystemGetDriverVersion"); rc != NVML_SUCCESS) return rc;
  std::lock_guard lock(g_mutex);
  return copy_text(g_scenario.driver_version, version, length);
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t* memory) {
  if (nvmlReturn_t rc = enter("nvmlDeviceGetMemoryInfo"); rc != NVML_SUCCESS) return rc;
  std::lock_guard lock(g_mutex);
  FakeDevice* dev = device_of(device);
  if (!dev || !memory) return NVML_ERROR_INVALID_ARGUMENT;
  memory->total = dev->total;
  memory->used = next_used(*dev);
  memory->free = dev->total - memory->used;
  return NVML_SUCCESS;
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device,
                                                         nvmlMemory_v2_t* memory) {
  if (nvmlReturn_t rc = enter("nvmlDeviceGetMemoryInfo_v2"); rc != NVML_SUCCESS) return rc;
  std::lock_guard lock(g_mutex);
  if (g_scenario.no_v2) return NVML_ERROR_FUNCTION_NOT_FOUND;
  FakeDevice* dev = device_of(device);
  if (!dev || !memory) return NVML_ERROR_INVALID_ARGUMENT;
  if (memory->version != nvmlMemory_v2) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
  memory->total = dev->total;
  memory->reserved = dev->reserved;
  memory->used = next_used(*dev);
  memory->free = dev->total - memory->used;
  return NVML_SUCCESS;
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device,
                                                            nvmlUtilization_t* rates) {
  if (nvmlReturn_t rc = enter("nvmlDeviceGetUtilizationRates"); rc != NVML_SUCCESS) return rc;
  std::lock_guard lock(g_mutex);
  FakeDevice* dev = device_of(device);
  if (!dev || !rates) return NVML_ERROR_INVALID_ARGUMENT;
  rates->gpu = dev->util_gpu;
  rates->memory = dev->util_memory;
  return NVML_SUCCESS;
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device, int sensor,
                                                       unsigned int* temp) {
  if (nvmlReturn_t rc = enter("nvmlDeviceGetTemperature"); rc != NVML_SUCCESS) return rc;
  std::lock_guard lock(g_mutex);
  FakeDevice* dev = device_of(device);
  if (!dev || !temp || sensor != NVML_TEMPERATURE_GPU) return NVML_ERROR_INVALID_ARGUMENT;
  *temp = dev->temperature;
  return NVML_SUCCESS;
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int* power) {
  if (nvmlReturn_t rc = enter("nvmlDeviceGetPowerUsage"); rc != NVML_SUCCESS) return rc;
  std::lock_guard lock(g_mutex);
  FakeDevice* dev = device_of(device);
  if (!dev || !power) return NVML_ERROR_INVALID_ARGUMENT;
  *power = dev->power_mw;
  return NVML_SUCCESS;
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t device, int type,
                                                     unsigned int* clock) {
  if (nvmlReturn_t rc = enter("nvmlDeviceGetClockInfo"); rc != NVML_SUCCESS) return rc;
  std::lock_guard lock(g_mutex);
  FakeDevice* dev = device_of(device);
  if (!dev || !clock) return NVML_ERROR_INVALID_ARGUMENT;
  if (type == NVML_CLOCK_SM)
    *clock = dev->sm_clock_mhz;
  else if (type == NVML_CLOCK_MEM)
    *clock = dev->mem_clock_mhz;
  else
    return NVML_ERROR_NOT_SUPPORTED;
  return NVML_SUCCESS;
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device,
                                                                      unsigned int* count,
                                                                      nvmlProcessInfo_t* infos) {
  if (nvmlReturn_t rc = enter("nvmlDeviceGetComputeRunningProcesses_v3"); rc != NVML_SUCCESS)
    return rc;
  std::lock_guard lock(g_mutex);
  FakeDevice* dev = device_of(device);
  if (!dev || !count) return NVML_ERROR_INVALID_ARGUMENT;
  std::vector<nvmlProcessInfo_t> listed;
  for (std::size_t k = 0; k < dev->processes.size(); ++k) {
    nvmlProcessInfo_t info = dev->processes[k];
    if (!dev->pid_files[k].empty()) info.pid = pid_from_file(dev->pid_files[k]);
    if (info.pid != 0 || dev->pid_files[k].empty()) listed.push_back(info);
  }
  const auto n = static_cast<unsigned>(listed.size());
  if (*count < n) {  // NVML's sizing protocol: report the needed count
    *count = n;
    return NVML_ERROR_INSUFFICIENT_SIZE;
  }
  if (n > 0 && !infos) return NVML_ERROR_INVALID_ARGUMENT;
  for (unsigned k = 0; k < n; ++k) infos[k] = listed[k];
  *count = n;
  return NVML_SUCCESS;
}
