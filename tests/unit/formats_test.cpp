// Fixture-driven tests of the format readers: every file under tests/fixtures/<fmt>/ is
// listed in expected_errors.json with the error name it must produce ("ok" when valid).
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "genscope/npy.hpp"
#include "genscope/safetensors.hpp"
#include "unit/format_test_util.hpp"

namespace genscope {
namespace {

const std::filesystem::path kFixtures =
    std::filesystem::path(GENSCOPE_SOURCE_DIR) / "tests" / "fixtures";

nlohmann::json manifest(const std::string& fmt) {
  std::ifstream in(kFixtures / fmt / "expected_errors.json");
  EXPECT_TRUE(in.good()) << "missing manifest for " << fmt;
  return nlohmann::json::parse(in);
}

// Every data file in the folder is in the manifest and every manifest entry exists.
void expect_manifest_complete(const std::string& fmt, const nlohmann::json& m) {
  std::set<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(kFixtures / fmt)) {
    const std::string name = entry.path().filename().string();
    if (name == "expected_errors.json" || name.ends_with(".dtype.json")) continue;
    files.insert(name);
  }
  std::set<std::string> listed;
  for (const auto& [name, expected] : m.items()) listed.insert(name);
  EXPECT_EQ(files, listed);
}

template <typename Read>
std::string outcome(Read&& read) {
  try {
    read();
  } catch (const Error& e) {
    return e.name();
  }
  return "ok";
}

TEST(FormatFixtures, SafetensorsManifest) {
  const nlohmann::json m = manifest("safetensors");
  expect_manifest_complete("safetensors", m);
  std::set<std::string> names_seen;
  for (const auto& [name, expected] : m.items()) {
    const auto path = kFixtures / "safetensors" / name;
    EXPECT_EQ(outcome([&] { SafetensorsFile::open(path); }), expected.get<std::string>()) << name;
    const auto bytes = test::read_bytes(path);
    EXPECT_EQ(outcome([&] { SafetensorsFile::parse(bytes); }), expected.get<std::string>())
        << name << " (parse)";
    names_seen.insert(expected.get<std::string>());
  }
  // Every error name the reader documents has at least one fixture.
  for (const char* name :
       {"ok", "HeaderLengthMissing", "HeaderTooLarge", "MetadataIncompleteBuffer",
        "InvalidHeaderUtf8", "InvalidHeaderJson", "DuplicateKey", "UnknownDtype", "InvalidShape",
        "SizeOverflow", "InvalidOffset", "TensorSizeMismatch", "TrailingBytes",
        "InvalidMetadata"}) {
    EXPECT_TRUE(names_seen.count(name)) << "no fixture for " << name;
  }
}

TEST(FormatFixtures, NpyManifest) {
  const nlohmann::json m = manifest("npy");
  expect_manifest_complete("npy", m);
  std::set<std::string> names_seen;
  for (const auto& [name, expected] : m.items()) {
    const auto path = kFixtures / "npy" / name;
    EXPECT_EQ(outcome([&] { read_npy(path); }), expected.get<std::string>()) << name;
    names_seen.insert(expected.get<std::string>());
  }
  for (const char* name :
       {"ok", "NpyBadMagic", "NpyUnsupportedVersion", "NpyHeaderInvalid", "NpyUnknownDescr",
        "NpyTruncated", "NpyTrailingBytes", "NpySidecarInvalid"}) {
    EXPECT_TRUE(names_seen.count(name)) << "no fixture for " << name;
  }
}

TEST(FormatFixtures, ValidFixturesReadBack) {
  const SafetensorsFile st =
      SafetensorsFile::open(kFixtures / "safetensors" / "ok_basic.safetensors");
  ASSERT_EQ(st.entries().size(), 2u);
  EXPECT_EQ(st.metadata().at("format"), "pt");
  EXPECT_EQ(st.find("b")->dtype, DType::kBF16);
  const NpyArray bf = read_npy(kFixtures / "npy" / "ok_bf16_sidecar.npy");
  EXPECT_EQ(bf.dtype(), DType::kBF16);
  const NpyArray be = read_npy(kFixtures / "npy" / "ok_be_f8.npy");
  double v[6];
  std::memcpy(v, be.bytes().data(), sizeof v);
  EXPECT_EQ(v[5], 1.5);
}

}  // namespace
}  // namespace genscope
