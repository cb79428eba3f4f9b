// OtlpSink (see otlp_sink.hpp).
#include "sinks/otlp_sink.hpp"

#include "genscope/error.hpp"

namespace genscope::detail {

OtlpSink::OtlpSink(const OtlpOptions& options) : exporter_(options) {}

void OtlpSink::run_finished(const Run& run) {
  const std::string problem = exporter_.send(run);
  if (!problem.empty()) throw Error("OtlpExportFailed", problem);
}

}  // namespace genscope::detail
