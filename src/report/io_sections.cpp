// Console rendering of a pipeline's inputs and outputs: seed 000's text processing analysis
// of a prompt ("text", text_analysis_json layout) and the files a pipeline wrote ("outputs").
#include <cmath>

#include "report/console_style.hpp"
#include "report/json_fields.hpp"

namespace genscope::detail {
namespace {

using nlohmann::json;

constexpr std::size_t kPromptChars = 160;  // longer prompts are cut (the full text: --verbose)

// Cuts at a UTF-8 boundary so a multi-byte character is never split.
std::string clipped(const std::string& text, std::size_t limit, const ConsoleStyle& s) {
  if (text.size() <= limit) return text;
  std::size_t cut = limit;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return text.substr(0, cut) + s.mark("…", "...");
}

}  // namespace

void render_text_attachment(std::string& out, const Attachment& a, const ConsoleStyle& s,
                            const std::string& indent) {
  const json& d = a.data;
  const std::string in = indent + "   ";
  out += indent + s.mark("📝 ", "") + "TEXT \"" + a.name + "\"";
  if (field_bool(d, "redacted")) {
    out += ": (redacted, xxh3 " + field_text(d, "hash") + ")\n";
  } else {
    const std::string text = field_text(d, "text");
    out += ": \"" + (s.verbose ? text : clipped(text, kPromptChars, s)) + "\"\n";
  }
  std::string line = format_count(field_number(d, "characters")) + " characters, " +
                     format_count(field_number(d, "words")) + " words, " +
                     format_count(field_number(d, "special_characters")) + " special characters";
  if (field_number(d, "bytes") != field_number(d, "characters")) {  // non-ASCII text
    line += " (" + format_count(field_number(d, "bytes")) + " bytes of UTF-8)";
  }
  const double tokens = field_number(d, "tokens");
  if (!std::isnan(tokens)) {
    line += "; " + format_count(tokens) + " tokens";
    const double context = field_number(d, "context_tokens");
    if (!std::isnan(context)) line += " of a " + format_count(context) + "-token context";
    if (field_bool(d, "truncated")) line += std::string(", ") + s.mark("⚠️ ", "! ") + "TRUNCATED";
  }
  out += in + line + "\n";
  std::string rates;
  const double cps = field_number(d, "characters_per_second");
  const double tps = field_number(d, "tokens_per_second");
  const double mpc = field_number(d, "memory_bytes_per_character");
  if (!std::isnan(cps)) rates += format_short_count(cps) + " characters/s";
  if (!std::isnan(tps)) rates += (rates.empty() ? "" : ", ") + format_short_count(tps) + " tokens/s";
  if (!std::isnan(mpc)) rates += (rates.empty() ? "" : ", ") + format_bytes(mpc) + " per character";
  if (!rates.empty()) out += in + "Encoding rate: " + rates + "\n";
  if (!field_bool(d, "valid_utf8", true)) {
    out += in + s.mark("⚠️  ", "! ") + "invalid UTF-8 in the prompt\n";
  }
}

void render_outputs_attachment(std::string& out, const Attachment& a, const ConsoleStyle& s,
                               const std::string& indent) {
  const json& d = a.data;
  const std::string in = indent + "   ";
  const json* files = field(d, "files");
  const std::size_t n = files != nullptr && files->is_array() ? files->size() : 0;
  double bytes = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double b = field_number((*files)[i], "bytes");
    if (!std::isnan(b)) bytes += b;
  }
  out += indent + s.mark("🖼️  ", "") + "OUTPUTS \"" + a.name + "\": " + std::to_string(n) +
         " file(s), " + format_bytes(bytes);
  if (!std::isnan(field_number(d, "width"))) {
    out += ", " + format_number(field_number(d, "width")) + "x" +
           format_number(field_number(d, "height"));
  }
  if (!field_text(d, "xxh3_64").empty()) out += ", xxh3 " + field_text(d, "xxh3_64");
  out += "\n";
  constexpr std::size_t kShown = 4;
  for (std::size_t i = 0; i < n && (s.verbose || i < kShown); ++i) {
    out += in + field_text((*files)[i], "path") + " (" +
           format_bytes(field_number((*files)[i], "bytes")) + ")\n";
  }
  if (!s.verbose && n > kShown) {
    out += in + s.mark("… ", "... ") + "and " + std::to_string(n - kShown) + " more\n";
  }
}

}  // namespace genscope::detail
