// Prompt text analysis: a small UTF-8 decoder and code-point classes.
#include "genscope/text_analysis.hpp"

#include <cmath>
#include <limits>

#include "genscope/tensor_stats.hpp"
#include "tensor/hash.hpp"

namespace genscope {
namespace {

// Decodes one code point at text[i]; advances i. Returns -1 for an invalid sequence
// (consuming one byte).
std::int32_t decode_utf8(std::string_view text, std::size_t& i) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char c = byte(i);
  int len = 0;
  std::int32_t cp = 0;
  if (c < 0x80) {
    ++i;
    return c;
  } else if ((c & 0xE0) == 0xC0) {
    len = 2, cp = c & 0x1F;
  } else if ((c & 0xF0) == 0xE0) {
    len = 3, cp = c & 0x0F;
  } else if ((c & 0xF8) == 0xF0) {
    len = 4, cp = c & 0x07;
  } else {
    ++i;
    return -1;
  }
  if (i + len > text.size()) {
    ++i;
    return -1;
  }
  for (int k = 1; k < len; ++k) {
    const unsigned char cc = byte(i + k);
    if ((cc & 0xC0) != 0x80) {
      ++i;
      return -1;
    }
    cp = (cp << 6) | (cc & 0x3F);
  }
  static constexpr std::int32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {  // overlong, surrogate
    ++i;
    return -1;
  }
  i += len;
  return cp;
}

bool is_space(std::int32_t cp) {
  return cp == ' ' || (cp >= 0x09 && cp <= 0x0D) || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
         cp == 0x205F || cp == 0x3000;
}

// Punctuation and symbol blocks; every other non-ASCII code point counts as a letter
// (a documented approximation without Unicode tables).
bool is_symbol(std::int32_t cp) {
  if (cp < 0x80) {
    return !((cp >= '0' && cp <= '9') || (cp >= 'A' && cp <= 'Z') || (cp >= 'a' && cp <= 'z'));
  }
  return cp < 0xA0 || (cp >= 0xA1 && cp <= 0xBF) || cp == 0xD7 || cp == 0xF7 ||
         (cp >= 0x2000 && cp <= 0x2BFF) || (cp >= 0x3000 && cp <= 0x303F) ||
         (cp >= 0xFE30 && cp <= 0xFE4F) || (cp >= 0xFF01 && cp <= 0xFF0F) ||
         (cp >= 0xFF1A && cp <= 0xFF20) || (cp >= 0xFF3B && cp <= 0xFF40) ||
         (cp >= 0xFF5B && cp <= 0xFF65) || (cp >= 0xFE00 && cp <= 0xFE0F) ||
         (cp >= 0x1F000 && cp <= 0x1FAFF) || cp == -1;
}

}  // namespace

TextAnalysis analyze_text(std::string_view text, const TextOptions& options) {
  TextAnalysis t;
  t.bytes = static_cast<std::int64_t>(text.size());
  t.hash = hash_hex(detail::xxh3_64(text.data(), text.size()));
  bool in_word = false;
  for (std::size_t i = 0; i < text.size();) {
    const std::int32_t cp = decode_utf8(text, i);
    ++t.characters;
    if (cp < 0) t.valid_utf8 = false;
    if (is_space(cp)) {
      ++t.whitespace;
      in_word = false;
      continue;
    }
    if (!in_word) ++t.words;
    in_word = true;
    if (is_symbol(cp)) ++t.special_characters;
  }
  t.redacted = options.redact;
  if (!options.redact) t.text = std::string(text);
  t.tokens = options.tokens;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double seconds = static_cast<double>(options.duration_ns) * 1e-9;
  t.characters_per_second = seconds > 0 ? static_cast<double>(t.characters) / seconds : nan;
  t.tokens_per_second =
      seconds > 0 && t.tokens ? static_cast<double>(*t.tokens) / seconds : nan;
  t.memory_bytes_per_character = options.memory_bytes > 0 && t.characters > 0
                                     ? static_cast<double>(options.memory_bytes) /
                                           static_cast<double>(t.characters)
                                     : nan;
  return t;
}

nlohmann::json text_analysis_json(const TextAnalysis& t) {
  auto num = [](double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(); };
  nlohmann::json j{
      {"redacted", t.redacted},
      {"hash", t.hash},
      {"bytes", t.bytes},
      {"characters", t.characters},
      {"words", t.words},
      {"whitespace", t.whitespace},
      {"special_characters", t.special_characters},
      {"valid_utf8", t.valid_utf8},
      {"tokens", t.tokens ? nlohmann::json(*t.tokens) : nlohmann::json()},
      {"characters_per_second", num(t.characters_per_second)},
      {"tokens_per_second", num(t.tokens_per_second)},
      {"memory_bytes_per_character", num(t.memory_bytes_per_character)},
  };
  if (!t.redacted) j["text"] = t.text;
  return j;
}

}  // namespace genscope
