// Prompt text analysis: UTF-8 counting, words, special characters, rates, redaction.
#include "genscope/text_analysis.hpp"

#include <gtest/gtest.h>

#include <cmath>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "genscope/tensor_stats.hpp"

namespace genscope {
namespace {

TEST(TextAnalysis, CountsAsciiPrompt) {
  const TextAnalysis t = analyze_text("a cat, on a mat! (8k)");
  EXPECT_EQ(t.characters, 21);
  EXPECT_EQ(t.bytes, 21);
  EXPECT_EQ(t.words, 6);
  EXPECT_EQ(t.whitespace, 5);
  EXPECT_EQ(t.special_characters, 4);  // , ! ( )
  EXPECT_TRUE(t.valid_utf8);
  EXPECT_EQ(t.text, "a cat, on a mat! (8k)");
  EXPECT_TRUE(std::isnan(t.characters_per_second));
}

TEST(TextAnalysis, CountsCodePointsNotBytes) {
  // "café 猫 🐱" : c a f é ␠ 猫 ␠ 🐱 = 8 code points, 3 + 2 + 1 + 3 + 1 + 4 = 14 bytes.
  const TextAnalysis t = analyze_text("caf\xC3\xA9 \xE7\x8C\xAB \xF0\x9F\x90\xB1");
  EXPECT_EQ(t.characters, 8);
  EXPECT_EQ(t.bytes, 14);
  EXPECT_EQ(t.words, 3);
  EXPECT_EQ(t.special_characters, 1);  // the emoji; é and 猫 are letters
  EXPECT_TRUE(t.valid_utf8);
  // Ideographic space separates words; fullwidth comma is special.
  const TextAnalysis cjk = analyze_text("\xE7\x8C\xAB\xE3\x80\x80\xE7\x8A\xAC\xEF\xBC\x8C");
  EXPECT_EQ(cjk.characters, 4);
  EXPECT_EQ(cjk.words, 2);
  EXPECT_EQ(cjk.whitespace, 1);
  EXPECT_EQ(cjk.special_characters, 1);
}

TEST(TextAnalysis, InvalidUtf8CountsEachBadByte) {
  const TextAnalysis t = analyze_text("ab\xFF\xC3");  // stray 0xFF, truncated 2-byte seq
  EXPECT_FALSE(t.valid_utf8);
  EXPECT_EQ(t.characters, 4);
  EXPECT_EQ(t.special_characters, 2);
  const TextAnalysis overlong = analyze_text("\xC0\xAF");
  EXPECT_FALSE(overlong.valid_utf8);
}

TEST(TextAnalysis, RatesFromDurationTokensAndMemory) {
  const TextAnalysis t = analyze_text("hello world", {.tokens = 4, .duration_ns = 500'000'000,
                                                     .memory_bytes = 1100});
  EXPECT_DOUBLE_EQ(t.characters_per_second, 22.0);
  EXPECT_DOUBLE_EQ(t.tokens_per_second, 8.0);
  EXPECT_DOUBLE_EQ(t.memory_bytes_per_character, 100.0);
  const nlohmann::json j = text_analysis_json(t);
  EXPECT_EQ(j["tokens"], 4);
  EXPECT_EQ(j["characters"], 11);
  EXPECT_EQ(j["text"], "hello world");
}

TEST(TextAnalysis, RedactionKeepsHashAndLengthOnly) {
  const std::string secret = "portrait of my neighbour";
  const TextAnalysis t = analyze_text(secret, {.redact = true});
  EXPECT_TRUE(t.redacted);
  EXPECT_TRUE(t.text.empty());
  EXPECT_EQ(t.characters, 24);
  EXPECT_EQ(t.hash, hash_hex(XXH3_64bits(secret.data(), secret.size())));
  const nlohmann::json j = text_analysis_json(t);
  EXPECT_FALSE(j.contains("text"));
  EXPECT_EQ(j.dump().find("neighbour"), std::string::npos);
  EXPECT_TRUE(j["characters_per_second"].is_null());
  // Same text, same hash; different text, different hash.
  EXPECT_EQ(analyze_text(secret).hash, t.hash);
  EXPECT_NE(analyze_text(secret + ".").hash, t.hash);
}

TEST(TextAnalysis, EmptyText) {
  const TextAnalysis t = analyze_text("");
  EXPECT_EQ(t.characters, 0);
  EXPECT_EQ(t.words, 0);
  EXPECT_EQ(t.hash, "2d06800538d394c2");
  EXPECT_TRUE(std::isnan(analyze_text("", {.memory_bytes = 10}).memory_bytes_per_character));
}

}  // namespace
}  // namespace genscope
