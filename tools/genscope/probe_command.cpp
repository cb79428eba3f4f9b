// `genscope probe [--json]`: what this machine has right now (RAM, process, GPUs via NVML).
#include <cmath>
#include <iostream>
#include <span>
#include <vector>

#include "command.hpp"
#include "genscope/host.hpp"
#include "genscope/probe.hpp"
#include "genscope/report.hpp"

namespace genscope::cli {
namespace {

struct ProbeReading {
  std::string name;
  std::string error;
  std::vector<MetricInfo> metrics;
  std::vector<double> values;
  std::vector<GpuInfo> gpus;
};

ProbeReading read_probe(std::unique_ptr<Probe> probe) {
  ProbeReading r;
  r.name = probe->name();
  ProbeStatus status = probe->open();
  if (!status.ok()) {
    r.error = status.error;
    return r;
  }
  r.metrics = probe->metrics();
  r.values.assign(r.metrics.size(), kNaN);
  status = probe->sample(r.values);
  if (!status.ok()) r.error = status.error;
  r.gpus = probe->gpus();
  return r;
}

std::string value_text(double v, Unit unit) {
  if (std::isnan(v)) return "n/a";
  char buf[48];
  switch (unit) {
    case Unit::kBytes: return format_bytes(v);
    case Unit::kPercent: std::snprintf(buf, sizeof buf, "%.1f%%", v); return buf;
    case Unit::kWatts: std::snprintf(buf, sizeof buf, "%.1f W", v); return buf;
    case Unit::kCelsius: std::snprintf(buf, sizeof buf, "%.0f C", v); return buf;
    case Unit::kHertz: std::snprintf(buf, sizeof buf, "%.0f MHz", v / 1e6); return buf;
    case Unit::kCount: std::snprintf(buf, sizeof buf, "%g", v); return buf;
  }
  return "?";
}

}  // namespace

void register_probe_command(CLI::App& app, CommandContext& context) {
  auto json_output = std::make_shared<bool>(false);
  auto nvml_path = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand("probe", "Show what this machine has right now");
  cmd->add_flag("--json", *json_output, "Machine-readable output");
  cmd->add_option("--nvml-library", *nvml_path,
                  "Path of libnvidia-ml (default: GENSCOPE_NVML_LIBRARY or libnvidia-ml.so.1)");
  cmd->callback([json_output, nvml_path, &context] {
    const HostInfo host = read_host_info();
    std::vector<ProbeReading> readings;
    readings.push_back(read_probe(make_process_probe()));
    readings.push_back(read_probe(make_system_probe()));
    readings.push_back(read_probe(make_nvml_probe(*nvml_path)));
    if (*json_output) {
      nlohmann::json j;
      j["host"] = {{"hostname", host.hostname}, {"cpu_model", host.cpu_model},
                   {"cpu_cores", host.cpu_cores}, {"ram_bytes", host.ram_bytes}, {"os", host.os}};
      for (const ProbeReading& r : readings) {
        nlohmann::json p;
        p["available"] = r.error.empty() || !r.metrics.empty();
        if (!r.error.empty()) p["error"] = r.error;
        for (std::size_t i = 0; i < r.metrics.size(); ++i) {
          const double v = r.values[i];
          p["metrics"][r.metrics[i].name] = {{"value", std::isnan(v) ? nlohmann::json() : nlohmann::json(v)},
                                             {"unit", to_string(r.metrics[i].unit)}};
        }
        for (const GpuInfo& g : r.gpus) {
          p["gpus"].push_back({{"index", g.index}, {"name", g.name}, {"uuid", g.uuid},
                               {"driver_version", g.driver_version}, {"total_bytes", g.total_bytes}});
        }
        j["probes"][r.name] = p;
      }
      std::cout << j.dump(2) << "\n";
    } else {
      std::cout << "Host: " << host.hostname << ", " << host.cpu_model << ", " << host.cpu_cores
                << " cores, " << format_bytes(host.ram_bytes) << " RAM, " << host.os << "\n";
      for (const ProbeReading& r : readings) {
        if (r.name == "nvml" && r.metrics.empty()) {
          std::cout << "GPU: NVML not available (" << r.error << ")\n";
          continue;
        }
        std::cout << r.name << ":\n";
        for (const GpuInfo& g : r.gpus) {
          std::cout << "  GPU " << g.index << ": " << g.name << " (" << g.uuid << "), driver "
                    << g.driver_version << ", " << format_bytes(g.total_bytes) << "\n";
        }
        for (std::size_t i = 0; i < r.metrics.size(); ++i) {
          std::cout << "  " << r.metrics[i].name << ": " << value_text(r.values[i], r.metrics[i].unit)
                    << "\n";
        }
        if (!r.error.empty()) std::cout << "  error: " << r.error << "\n";
      }
    }
    context.exit_code = 0;
  });
}

}  // namespace genscope::cli
