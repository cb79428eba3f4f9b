// Counters that keep counting across pushes (private to src/sinks).
//
// A push replaces its group on the Pushgateway, so a counter pushed as "this run's count"
// would read 1, 1, 1, ... and increase(genscope_runs_total[1h]) would be 0. Before pushing,
// genscope reads the group's current values (GET /api/v1/metrics) and adds them to this
// run's counters and histograms: each push then carries the totals over every run pushed to
// that group (job, instance), as a long-lived process's counters would.
#pragma once

#include <nlohmann/json.hpp>
#include <string_view>
#include <vector>

#include "report/metrics_exposition.hpp"

namespace genscope::detail {

/// Adds to the counter and histogram points of `families` the values the group (job,
/// instance, and rank when not empty: a rank's run, docs/distributed.md) holds in `api_answer`, a Pushgateway's GET /api/v1/metrics answer; series of the
/// group that this run lacks (another status, kind, ...) are added with their old values.
/// Anything unreadable in the answer is ignored (the counters then restart, which
/// Prometheus's increase() reads as a reset).
void add_pushed_totals(std::vector<MetricFamily>& families, const nlohmann::json& api_answer,
                       std::string_view job, std::string_view instance,
                       std::string_view rank = {});

}  // namespace genscope::detail
