// TqdmRecognizer: tqdm progress bars as steps with iterations (see tqdm_recognizer.cpp).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "watch/recognizer.hpp"

namespace genscope::watch {

/// The step kind of a bar: its desc names the phase ("Loading pipeline components" is model
/// loading, an empty desc or "Sampling"/"denoise"/"inference" is sampling, ...); bars that do
/// not count iterations ("it") are custom.
StepKind tqdm_kind_for_desc(std::string_view desc, bool iterations);

/// Reads tqdm frames.
class TqdmRecognizer final : public Recognizer {
 public:
  /// `claimed_descs`: bars that another recogniser reads (A1111's "Total progress").
  explicit TqdmRecognizer(std::vector<std::string> claimed_descs = {});
  ~TqdmRecognizer() override;
  std::string_view name() const override { return "tqdm"; }
  std::vector<std::string> anchors() const override;
  bool wants_every_line() const override { return pending_close_ != nullptr; }
  LineResult on_line(const OutputLine& line, StepApplier& applier) override;

 private:
  struct Bar;
  void finish(Bar& bar, StepApplier& applier, std::int64_t steady_ns);
  void forget_finished_bars(const Bar* keep);
  static constexpr std::size_t kMaxBars = 1024;  // bars remembered (finished ones dropped past it)
  Bar* pending_close_ = nullptr;  // a bar whose frame ended with '\n' before its total
  int pending_stream_ = 0;
  Bar* last_bar_[2] = {nullptr, nullptr};  // the bar of the last frame on stdout, stderr
  std::vector<std::string> claimed_;
  std::map<std::string, std::unique_ptr<Bar>, std::less<>> bars_;
  std::vector<std::int64_t> scratch_;
};

}  // namespace genscope::watch
