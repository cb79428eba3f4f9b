// The sinks a Monitor registers by itself from its options and environment (the text log,
// the history recorder, ...). Declared for core, defined with the sinks in src/sinks/, so
// core includes no store, report or exporter header.
#pragma once

#include <memory>
#include <vector>

#include "genscope/monitor.hpp"
#include "genscope/sink.hpp"

namespace genscope::detail {

/// The sinks that `options` (and the environment: GENSCOPE_LOG, GENSCOPE_EVENTS_FD) ask for.
std::vector<std::shared_ptr<Sink>> make_option_sinks(const MonitorOptions& options);

}  // namespace genscope::detail
