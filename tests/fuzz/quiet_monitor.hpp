// The monitor the watch fuzz targets feed: no probes, no sampler (only the parsing is fuzzed).
#pragma once

#include "genscope/monitor.hpp"

namespace genscope::fuzz {

inline genscope::Monitor& quiet_monitor() {
  static genscope::Monitor m([] {
    genscope::MonitorOptions o;
    o.process_probe = false;
    o.system_probe = false;
    o.nvml_probe = false;
    o.sampler = false;
    return o;
  }());
  return m;
}

}  // namespace genscope::fuzz
