// PushgatewaySink: pushes each finished run's figures to a Prometheus Pushgateway
// (MonitorOptions::pushgateway_url). A failed push is a monitoring error of that run
// (source "pushgateway"), never an exception into the pipeline.
#pragma once

#include <string>

#include "genscope/sink.hpp"

namespace genscope::detail {

class PushgatewaySink final : public Sink {
 public:
  explicit PushgatewaySink(std::string url) : url_(std::move(url)) {}
  std::string name() const override { return "pushgateway"; }
  unsigned events() const override { return kRunEvents; }
  /// push_run_metrics(run, url); its genscope::Error becomes the run's monitoring error.
  void run_finished(const Run& run) override;

 private:
  std::string url_;
};

/// The Pushgateway path of a grouping key: "/metrics/job/<job>/instance/<instance>", each
/// value that is empty or not URL-safe written as "<label>@base64/<base64url>"
/// (prometheus/pushgateway README.md, "URL").
std::string pushgateway_group_path(std::string_view job, std::string_view instance,
                                   std::string_view rank = {});

/// RFC 4648 §5 base64url without padding ("=" for the empty string, as the Pushgateway asks).
std::string base64url(std::string_view bytes);

}  // namespace genscope::detail
