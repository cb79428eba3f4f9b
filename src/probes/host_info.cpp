// read_host_info(): the static description of this machine recorded in every run.
//
// hostname  gethostname()
// cpu_model /proc/cpuinfo "model name" (x86), else "Model"/"Hardware"/"cpu model" (ARM,
//           MIPS, ...), else the uname machine name
// cpu_cores sysconf(_SC_NPROCESSORS_ONLN) (logical CPUs online)
// ram_bytes /proc/meminfo MemTotal
// os        uname: "<sysname> <release>", e.g. "Linux 6.1.0"
#include <fcntl.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "genscope/host.hpp"
#include "probes/proc_file.hpp"

namespace genscope {
namespace {

std::string trim(std::string text) {
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) return {};
  const auto last = text.find_last_not_of(" \t\r\n");
  return text.substr(first, last - first + 1);
}

std::string read_cpu_model() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  for (const char* key : {"model name", "Model", "Hardware", "cpu model"}) {
    cpuinfo.clear();
    cpuinfo.seekg(0);
    while (std::getline(cpuinfo, line)) {
      const auto colon = line.find(':');
      if (colon == std::string::npos) continue;
      if (trim(line.substr(0, colon)) == key) {
        std::string value = trim(line.substr(colon + 1));
        if (!value.empty()) return value;
      }
    }
  }
  return {};
}

}  // namespace

HostInfo read_host_info() noexcept {
  HostInfo info;
  try {
    char name[256] = {};
    if (::gethostname(name, sizeof name - 1) == 0) info.hostname = name;
    const long cores = ::sysconf(_SC_NPROCESSORS_ONLN);
    info.cpu_cores = cores > 0 ? static_cast<int>(cores) : 0;
    struct utsname uts {};
    const bool have_uts = ::uname(&uts) == 0;
    if (have_uts) info.os = std::string(uts.sysname) + " " + uts.release;
    info.cpu_model = read_cpu_model();
    if (info.cpu_model.empty() && have_uts) info.cpu_model = uts.machine;
    detail::ProcFile meminfo;
    if (meminfo.open("/proc/meminfo", O_RDONLY).empty()) {
      char buffer[8192];
      const long n = meminfo.read_into(buffer, sizeof buffer);
      if (n > 0) {
        if (auto total = detail::parse_kb_field({buffer, size_t(n)}, "MemTotal"))
          info.ram_bytes = static_cast<double>(*total);
      }
    }
  } catch (...) {
    // Only allocation can throw here; return what was gathered.
  }
  return info;
}

}  // namespace genscope
