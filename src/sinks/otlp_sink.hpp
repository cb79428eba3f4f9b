// OtlpSink: exports each finished run to an OpenTelemetry collector (MonitorOptions::otlp,
// docs/opentelemetry.md). run_finished() queues the run on an OtlpExporter and waits for it up
// to OtlpOptions::wait: a failure seen by then, one of an earlier run seen since, or a run not
// confirmed in time is a monitoring error of this run (source "otlp"), never an exception into
// the pipeline.
#pragma once

#include <memory>

#include "genscope/otlp.hpp"
#include "genscope/sink.hpp"

namespace genscope::detail {

class OtlpSink final : public Sink {
 public:
  /// Throws like resolve_otlp_targets() for bad settings.
  explicit OtlpSink(const OtlpOptions& options);
  std::string name() const override { return "otlp"; }
  unsigned events() const override { return kRunEvents; }
  void run_finished(const Run& run) override;

 private:
  OtlpExporter exporter_;
};

}  // namespace genscope::detail
