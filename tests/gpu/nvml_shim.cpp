// An NVML library that forwards every call genscope makes to a real one, except one entry
// point, which answers as an unsupported call does on this GPU. It lets scripts/gpu-check
// drive genscope's "call unsupported" path on real hardware when none of the calls genscope
// makes is unsupported there (on an H100 they all are supported).
//
//   GENSCOPE_NVML_LIBRARY=libnvml_shim.so          genscope loads the shim
//   GENSCOPE_NVML_SHIM_TARGET=libnvidia-ml.so.1    the real library (default: that name)
//   GENSCOPE_NVML_SHIM_UNSUPPORTED=nvmlDeviceGetPowerUsage
//                                                  the entry point to refuse (any device
//                                                  call below; unset: forward everything)
//
// What the refused call returns is the driver's own answer to nvmlDeviceGetFanSpeed for the
// same device when that is an error (H100 and H200 have no fan: NVML_ERROR_NOT_SUPPORTED,
// straight from the driver), else NVML_ERROR_NOT_SUPPORTED made up here. The shim writes one
// line to stderr saying which, so the check can label its row honestly. Optional entry
// points missing from the target (nvmlDeviceGetMemoryInfo_v2, ..._v3) answer
// NVML_ERROR_FUNCTION_NOT_FOUND, as genscope treats a missing symbol.
//
// Built by tests/gpu/CMakeLists.txt; used by tests/gpu/check_failures.py.
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "probes/nvml_api.hpp"

extern "C" {
typedef nvmlReturn_t (*PFN_nvmlDeviceGetFanSpeed)(nvmlDevice_t, unsigned int*);
}

namespace {

struct Target {
  void* handle = nullptr;
  const char* unsupported = nullptr;  // entry point to refuse, or nullptr
  PFN_nvmlDeviceGetFanSpeed fan_speed = nullptr;
};

Target& target() {
  static Target t;
  static std::once_flag once;
  std::call_once(once, [] {
    const char* path = std::getenv("GENSCOPE_NVML_SHIM_TARGET");
    if (!path || !*path) path = "libnvidia-ml.so.1";
    t.handle = ::dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!t.handle) std::fprintf(stderr, "nvml_shim: cannot load %s: %s\n", path, ::dlerror());
    const char* refuse = std::getenv("GENSCOPE_NVML_SHIM_UNSUPPORTED");
    if (refuse && *refuse) t.unsupported = refuse;
    if (t.handle)
      t.fan_speed =
          reinterpret_cast<PFN_nvmlDeviceGetFanSpeed>(::dlsym(t.handle, "nvmlDeviceGetFanSpeed"));
  });
  return t;
}

void* resolve(const char* name) {
  Target& t = target();
  return t.handle ? ::dlsym(t.handle, name) : nullptr;
}

// The answer of the refused entry point, and a one-time note of where it came from.
nvmlReturn_t refusal(nvmlDevice_t device, const char* name) {
  Target& t = target();
  nvmlReturn_t rc = NVML_ERROR_NOT_SUPPORTED;
  const char* origin = "made up by the shim: nvmlDeviceGetFanSpeed is absent";
  if (t.fan_speed) {
    unsigned speed = 0;
    const nvmlReturn_t fan = t.fan_speed(device, &speed);
    if (fan != NVML_SUCCESS) {
      rc = fan;
      origin = "the driver's answer to nvmlDeviceGetFanSpeed on this GPU";
    } else {
      origin = "made up by the shim: nvmlDeviceGetFanSpeed works on this GPU";
    }
  }
  static std::once_flag noted;
  std::call_once(noted, [&] {
    std::fprintf(stderr, "nvml_shim: %s refused with code %d (%s)\n", name, rc, origin);
  });
  return rc;
}

bool refused(const char* name) {
  const char* u = target().unsupported;
  return u && std::strcmp(u, name) == 0;
}

}  // namespace

// Forwards `name` with the arguments; `missing` is the answer when the target lacks it.
#define GENSCOPE_FORWARD(name, missing, ...)           \
  using Fn = PFN_##name;                               \
  static Fn fn = reinterpret_cast<Fn>(resolve(#name)); \
  if (!fn) return missing;                             \
  return fn(__VA_ARGS__)

#define GENSCOPE_DEVICE_CALL(name, device, ...)      \
  if (refused(#name)) return refusal(device, #name); \
  GENSCOPE_FORWARD(name, NVML_ERROR_FUNCTION_NOT_FOUND, device, __VA_ARGS__)

extern "C" {

__attribute__((visibility("default"))) nvmlReturn_t nvmlInit_v2(void) {
  GENSCOPE_FORWARD(nvmlInit_v2, NVML_ERROR_LIBRARY_NOT_FOUND);
}
__attribute__((visibility("default"))) nvmlReturn_t nvmlShutdown(void) {
  GENSCOPE_FORWARD(nvmlShutdown, NVML_ERROR_UNINITIALIZED);
}
__attribute__((visibility("default"))) const char* nvmlErrorString(nvmlReturn_t rc) {
  GENSCOPE_FORWARD(nvmlErrorString, "Unknown Error (NVML shim: no target)", rc);
}
__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* count) {
  GENSCOPE_FORWARD(nvmlDeviceGetCount_v2, NVML_ERROR_UNINITIALIZED, count);
}
__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(
    unsigned int index, nvmlDevice_t* device) {
  GENSCOPE_FORWARD(nvmlDeviceGetHandleByIndex_v2, NVML_ERROR_UNINITIALIZED, index, device);
}
__attribute__((visibility("default"))) nvmlReturn_t nvmlSystemGetDriverVersion(char* text,
                                                                               unsigned int size) {
  GENSCOPE_FORWARD(nvmlSystemGetDriverVersion, NVML_ERROR_UNINITIALIZED, text, size);
}
__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device,
                                                                      char* text,
                                                                      unsigned int size) {
  GENSCOPE_DEVICE_CALL(nvmlDeviceGetName, device, text, size);
}
__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device,
                                                                      char* text,
                                                                      unsigned int size) {
  GENSCOPE_DEVICE_CALL(nvmlDeviceGetUUID, device, text, size);
}
__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device,
                                                                            nvmlMemory_t* memory) {
  GENSCOPE_DEVICE_CALL(nvmlDeviceGetMemoryInfo, device, memory);
}
__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(
    nvmlDevice_t device, nvmlMemory_v2_t* memory) {
  GENSCOPE_DEVICE_CALL(nvmlDeviceGetMemoryInfo_v2, device, memory);
}
__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetUtilizationRates(
    nvmlDevice_t device, nvmlUtilization_t* utilization) {
  GENSCOPE_DEVICE_CALL(nvmlDeviceGetUtilizationRates, device, utilization);
}
__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device,
                                                                             int sensor,
                                                                             unsigned int* value) {
  GENSCOPE_DEVICE_CALL(nvmlDeviceGetTemperature, device, sensor, value);
}
__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device,
                                                                            unsigned int* mw) {
  GENSCOPE_DEVICE_CALL(nvmlDeviceGetPowerUsage, device, mw);
}
__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t device,
                                                                           int type,
                                                                           unsigned int* mhz) {
  GENSCOPE_DEVICE_CALL(nvmlDeviceGetClockInfo, device, type, mhz);
}
__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(
    nvmlDevice_t device, unsigned int* count, nvmlProcessInfo_t* infos) {
  GENSCOPE_DEVICE_CALL(nvmlDeviceGetComputeRunningProcesses_v3, device, count, infos);
}

}  // extern "C"
