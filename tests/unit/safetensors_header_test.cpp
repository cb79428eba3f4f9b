// The strict JSON event parser behind the safetensors header: grammar corners that a general
// JSON library handled before (escapes, surrogates, numbers, nesting, trailing content).
#include <gtest/gtest.h>

#include <string>

#include "formats/safetensors_header.hpp"

namespace genscope::detail {
namespace {

RawSafetensorsHeader parse(const std::string& json) { return parse_safetensors_header(json); }

TEST(SafetensorsHeaderJson, EscapesAndSurrogatesDecodeToUtf8) {
  const auto h = parse(R"({"a\u00e9\ud83d\ude00\n\"/\\":{"dtype":"F32","shape":[],"data_offsets":[0,4]}})");
  ASSERT_TRUE(h.json_ok) << h.json_error;
  ASSERT_EQ(h.entries.size(), 1u);
  EXPECT_EQ(h.entries[0].name, "a\xc3\xa9\xf0\x9f\x98\x80\n\"/\\");
}

TEST(SafetensorsHeaderJson, NumbersOnlyUnsignedIntegersCount) {
  const auto h = parse(R"({"t":{"dtype":"F32","shape":[-0, 2, 18446744073709551615],"data_offsets":[0,1e3]}})");
  ASSERT_TRUE(h.json_ok) << h.json_error;
  EXPECT_TRUE(h.entries[0].shape_ok == false);  // 2^64-1 does not fit int64
  EXPECT_FALSE(h.entries[0].offsets_ok);        // 1e3 is not an integer literal
  const auto big = parse(R"({"t":{"shape":[18446744073709551616]}})");
  ASSERT_TRUE(big.json_ok);
  EXPECT_FALSE(big.entries[0].shape_ok);  // overflow: a number, but not a size
  const auto neg = parse(R"({"t":{"shape":[-1]}})");
  EXPECT_FALSE(neg.entries[0].shape_ok);
}

TEST(SafetensorsHeaderJson, InvalidJsonIsRejectedWithAnOffset) {
  for (const char* bad : {R"({"a":1,})", R"({"a" 1})", R"({"a":01})", R"({"a":1.})", R"({"a":.5})",
                          R"({"a":tru})", R"({"a":"x)", "{\"a\":\"\x01\"}", R"({"a":"\x"})",
                          R"({"a":"\ud800"})", R"({"a":"\udc00"})", R"({"a":"\u12"})",
                          R"({"a":1} x)", R"({"a":-})", R"({a:1})", "", "   "}) {
    const auto h = parse(bad);
    EXPECT_FALSE(h.json_ok) << "accepted: " << bad;
  }
}

TEST(SafetensorsHeaderJson, DeepNestingIsAnErrorNotACrash) {
  std::string deep = R"({"__metadata__":)";
  for (int i = 0; i < 100000; ++i) deep += '[';
  const auto h = parse(deep);
  EXPECT_FALSE(h.json_ok);
  EXPECT_NE(h.json_error.find("nesting too deep"), std::string::npos);
}

TEST(SafetensorsHeaderJson, DuplicatesOfMetadataAndFieldsAreSeen) {
  EXPECT_EQ(parse(R"({"__metadata__":{},"__metadata__":{}})").duplicate_key, "__metadata__");
  EXPECT_EQ(parse(R"({"t":{"dtype":"F32","dtype":"F16"}})").duplicate_key, "t.dtype");
  EXPECT_EQ(parse(R"({"__metadata__":{"k":"a","k":"b"}})").duplicate_key, "__metadata__.k");
}

}  // namespace
}  // namespace genscope::detail
