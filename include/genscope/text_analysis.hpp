// Prompt text analysis: characters, words, special characters, rates, optional redaction.
//
// Example:
//   genscope::TextAnalysis t = genscope::analyze_text(prompt, {.tokens = 12, .duration_ns = 80'000'000});
//   step.attach({"text", "prompt", genscope::text_analysis_json(t)});
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace genscope {

/// What analyze_text is told besides the text.
struct TextOptions {
  bool redact = false;  ///< Keep only the XXH3 hash and the length, not the text.
  std::optional<std::int64_t> tokens;  ///< Token count from the tokenizer, when known.
  std::int64_t duration_ns = 0;  ///< Encoding time (0 = unknown) for per-second rates.
  std::int64_t memory_bytes = 0;  ///< Memory attributed to the encoding (0 = unknown).
};

/// Figures of one prompt. Counts are over Unicode code points of the UTF-8 text.
struct TextAnalysis {
  std::string text;       ///< The text; empty when redacted.
  bool redacted = false;  ///< True when the text was dropped.
  std::string hash;       ///< XXH3-64 of the UTF-8 bytes, 16 hex digits (always set).
  std::int64_t bytes = 0;       ///< UTF-8 length in bytes.
  std::int64_t characters = 0;  ///< Code points (an invalid byte counts as one).
  std::int64_t words = 0;       ///< Maximal runs of non-whitespace code points.
  std::int64_t whitespace = 0;  ///< Whitespace code points.
  std::int64_t special_characters = 0;  ///< Neither alphanumeric nor whitespace.
  bool valid_utf8 = true;       ///< False when an invalid byte sequence was seen.
  std::optional<std::int64_t> tokens;   ///< As given.
  double characters_per_second = 0;  ///< NaN when the duration is unknown.
  double tokens_per_second = 0;      ///< NaN when tokens or duration are unknown.
  double memory_bytes_per_character = 0;  ///< NaN when memory or characters are unknown.
};

/// Analyses a UTF-8 prompt.
TextAnalysis analyze_text(std::string_view text, const TextOptions& options = {});

/// The attachment JSON of a text analysis (layout in docs/tensor-analysis.md).
nlohmann::json text_analysis_json(const TextAnalysis& analysis);

}  // namespace genscope
