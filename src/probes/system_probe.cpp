// The system probe: machine-wide memory from /proc/meminfo.
//
//   MemTotal:       131072000 kB      → system.total_bytes
//   MemFree:          ...
//   MemAvailable:    98304000 kB      → system.available_bytes
//   used = total − available          → system.used_bytes, system.used_percent
//
// The file is opened once and re-read with pread; the parser is hand-written (no
// streams, no allocation) because the sampler calls it every few milliseconds.
#include <fcntl.h>

#include <limits>

#include "genscope/probe.hpp"
#include "probes/proc_file.hpp"
#include "probes/procfs_probes.hpp"

namespace genscope {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

class SystemProbe final : public Probe {
 public:
  explicit SystemProbe(const char* meminfo_path) : meminfo_path_(meminfo_path) {
    metrics_ = {{"system.total_bytes", Unit::kBytes, false},
                {"system.available_bytes", Unit::kBytes, false},
                {"system.used_bytes", Unit::kBytes, false},
                {"system.used_percent", Unit::kPercent, false}};
  }

  std::string name() const override { return "system"; }
  const std::vector<MetricInfo>& metrics() const override { return metrics_; }

  ProbeStatus open() override {
    if (std::string error = meminfo_.open(meminfo_path_, O_RDONLY); !error.empty())
      return ProbeStatus::failure("system probe: " + error);
    return {};
  }

  ProbeStatus sample(std::span<double> out) override {
    for (double& v : out) v = kNaN;
    if (!meminfo_.is_open()) return ProbeStatus::failure("system probe: not open");
    char buffer[8192];  // /proc/meminfo is ~1.5 KiB; both keys are in the first lines
    const long n = meminfo_.read_into(buffer, sizeof buffer);
    if (n < 0)
      return ProbeStatus::failure(std::string("pread ") + meminfo_path_ + ": " +
                                  detail::errno_text(-n));
    const std::string_view text(buffer, static_cast<size_t>(n));
    const auto total = detail::parse_kb_field(text, "MemTotal");
    const auto available = detail::parse_kb_field(text, "MemAvailable");
    if (total) out[0] = static_cast<double>(*total);
    if (available) out[1] = static_cast<double>(*available);
    if (!total || !available) {
      return ProbeStatus::failure(std::string(meminfo_path_) + ": no " +
                                  (total ? "MemAvailable" : "MemTotal") + " line");
    }
    const double used = out[0] - out[1];
    out[2] = used;
    out[3] = out[0] > 0 ? 100.0 * used / out[0] : kNaN;
    return {};
  }

 private:
  const char* meminfo_path_;
  std::vector<MetricInfo> metrics_;
  detail::ProcFile meminfo_;
};

}  // namespace

std::unique_ptr<Probe> make_system_probe() { return detail::make_system_probe("/proc/meminfo"); }

std::unique_ptr<Probe> detail::make_system_probe(const char* meminfo_path) {
  return std::make_unique<SystemProbe>(meminfo_path);
}

}  // namespace genscope
