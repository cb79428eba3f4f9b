// The sinks a Monitor's options and environment ask for: the text log, the history recorder,
// the metrics endpoint, the Pushgateway, the OTLP export, and the event channel to a parent
// `genscope run` (GENSCOPE_EVENTS_FD), or a rank's own run documents (GENSCOPE_RANK_RUN_DIR).
#include "core/option_sinks.hpp"

#include <cstdlib>

#include "genscope/distributed.hpp"
#include "genscope/metrics.hpp"
#include "sinks/event_channel_sink.hpp"
#include "sinks/history_sink.hpp"
#include "sinks/log_file_sink.hpp"
#include "sinks/otlp_sink.hpp"
#include "sinks/pushgateway_sink.hpp"
#include "sinks/rank_run_sink.hpp"

namespace genscope::detail {

std::vector<std::shared_ptr<Sink>> make_option_sinks(const MonitorOptions& options) {
  std::vector<std::shared_ptr<Sink>> sinks;
  std::string log_path = options.log_path;
  if (log_path.empty()) {
    if (const char* env = std::getenv("GENSCOPE_LOG")) log_path = env;
  }
  if (!log_path.empty()) sinks.push_back(std::make_shared<LogFileSink>(log_path));
  if (options.record) sinks.push_back(std::make_shared<HistorySink>(options.history_db));
  if (options.metrics_port != 0) {
    sinks.push_back(std::make_shared<MetricsEndpoint>(
        MetricsEndpointOptions{.bind_address = options.metrics_bind, .port = options.metrics_port}));
  }
  if (!options.pushgateway_url.empty()) {
    sinks.push_back(std::make_shared<PushgatewaySink>(options.pushgateway_url));
  }
  if (options.otlp.enabled || !options.otlp.endpoint.empty()) {
    sinks.push_back(std::make_shared<OtlpSink>(options.otlp));
  }
  // A rank under `genscope run --out DIR -- torchrun ...` writes its own run documents to
  // DIR/ranks instead of forwarding its steps into the launcher's run, so each rank's run
  // stays its own (docs/distributed.md).
  const char* rank_dir = std::getenv(kRankRunDirVariable);
  const std::optional<DistributedInfo> distributed = distributed_from_environment();
  // (A rank known only from its process group, genscope.torch.mark_distributed(), is written
  // there too, and forwards as well.)
  const bool rank_runs = rank_dir != nullptr && *rank_dir != '\0';
  if (rank_runs) sinks.push_back(std::make_shared<RankRunSink>(rank_dir));
  if (!(rank_runs && distributed)) {
    if (auto events = make_event_channel_sink_from_env()) sinks.push_back(std::move(events));
  }
  return sinks;
}

}  // namespace genscope::detail
