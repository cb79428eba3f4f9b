// OtlpSink (see otlp_sink.hpp).
#include "sinks/otlp_sink.hpp"

#include "genscope/error.hpp"

namespace genscope::detail {

OtlpSink::OtlpSink(const OtlpOptions& options) : wait_(options.wait), exporter_(options) {}

void OtlpSink::run_finished(const Run& run) {
  const std::uint64_t ticket = exporter_.submit(run);
  std::string error;
  const OtlpOutcome outcome = exporter_.wait(ticket, wait_, &error);
  std::vector<std::string> problems;
  if (outcome == OtlpOutcome::kFailed || outcome == OtlpOutcome::kDropped) {
    problems.push_back("run not exported: " + error);
  } else if (outcome == OtlpOutcome::kPending) {
    problems.push_back("run not confirmed by " + exporter_.traces_url() + " within " +
                       std::to_string(wait_.count()) +
                       " ms (the export goes on in the background)");
  }
  for (std::string& earlier : exporter_.take_unreported_failures()) {
    problems.push_back("an earlier " + earlier);
  }
  if (problems.empty()) return;
  std::string message;
  for (const std::string& p : problems) message += (message.empty() ? "" : "; ") + p;
  const OtlpCounts c = exporter_.counts();
  message += " [delivered " + std::to_string(c.delivered) + ", failed " + std::to_string(c.failed) +
             ", dropped " + std::to_string(c.dropped) + "]";
  throw Error("OtlpExportFailed", message);
}

}  // namespace genscope::detail
