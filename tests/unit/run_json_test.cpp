// Tests of the run document: round trip, derived fields, malformed documents, atomic writes.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>

#include "genscope/genscope.hpp"

namespace genscope {
namespace {

std::filesystem::path scratch(const std::string& name) {
  const char* base = std::getenv("GENSCOPE_TEST_TMP");
  std::filesystem::path dir = std::filesystem::path(base ? base : "/tmp") / "run_json_test";
  std::filesystem::create_directories(dir);
  return dir / name;
}

genscope::Run sample_run() {
  genscope::Run r;
  r.id = "0123456789abcdef0123456789abcdef";
  r.start_utc = "2026-11-21T12:00:00.000Z";
  r.start_unix_ns = 1'795'000'000'000'000'000;
  r.duration_ns = 2'450'000'000;
  r.genscope_version = "0.1.0";
  r.host = {"box", "Test CPU", 2, 24.0 * (1 << 30), "Linux 6.1"};
  r.gpus.push_back({0, "Fake H100", "GPU-1", "550.54", 80.0 * (1 << 30)});
  r.pipeline = {"t2i", "sd15", "UNet", {{"steps", "20"}, {"seed", "7"}}};
  r.labels = {{"branch", "main"}};
  r.probes = {"process", "system"};
  r.absent_probes = {{"nvml", "no NVIDIA driver library (libnvidia-ml.so.1 not found)"}};
  r.notes = {"a note"};
  StepRecord s;
  s.id = 0;
  s.name = "encode";
  s.kind = StepKind::kLatentGeneration;
  s.status = StepStatus::kFailed;
  s.error_type = "std::runtime_error";
  s.error_message = "boom";
  s.duration_ns = 1000;
  s.metrics.push_back({"process.rss_bytes", Unit::kBytes, 100, 150, 300, 42, "exact"});
  s.metrics.push_back({"gpu0.power_watts", Unit::kWatts, kNaN, 250, 251, -1, "sampled"});
  s.attempts.push_back({"direct", StepStatus::kFailed, "OOM", 10});
  s.attempts.push_back({"tiled", StepStatus::kOk, "", 20});
  s.iteration_ns = {300, 100, 200};
  s.iterations_inferred = true;
  s.counters = {{"frames", 16}};
  s.labels = {{"strategy", "tiled"}};
  s.attachments.push_back({"tensor", "latent", {{"shape", {1, 4, 64, 64}}}});
  r.steps.push_back(s);
  StepRecord child;
  child.id = 1;
  child.parent_id = 0;
  child.name = "tile";
  child.kind = StepKind::kCustom;
  child.status = StepStatus::kOk;
  r.steps.push_back(child);
  r.series.metrics = {"process.rss_bytes"};
  r.series.units = {Unit::kBytes};
  r.series.offset_ns = {0, 10, 20};
  r.series.values = {1, kNaN, 3};
  r.series.interval_ns = 10;
  r.series.samples_taken = 3;
  r.series.capacity = 8;
  r.monitoring_errors.push_back({"nvml", "hung", 5, "encode"});
  r.attachments.push_back({"performance", "", {{"score", 87.5}}});
  return r;
}

TEST(RunJson, RoundTripKeepsEveryField) {
  const genscope::Run r = sample_run();
  const nlohmann::json j = to_json(r);
  EXPECT_EQ(j["schema"], "genscope.run/1");
  const genscope::Run back = run_from_json(j);
  EXPECT_EQ(to_json(back), j);
  EXPECT_EQ(back.steps[0].metrics[0].peak, 300);
  EXPECT_TRUE(std::isnan(back.steps[0].metrics[1].before));
  EXPECT_TRUE(std::isnan(back.series.at(1, 0)));
  EXPECT_EQ(back.steps[1].parent_id, 0);
  ASSERT_EQ(back.absent_probes.size(), 1u);
  EXPECT_EQ(back.absent_probes[0].probe, "nvml");
  EXPECT_TRUE(back.steps[0].iterations_inferred);
  EXPECT_EQ(j["steps"][0]["iterations"]["inferred"], true);
}

TEST(RunJson, IntegersOutOfRangeAreNamedErrors) {
  // Found by event_line_fuzz: a float beyond int64 was converted (undefined behaviour).
  for (const nlohmann::json bad : {nlohmann::json(-2.2e41), nlohmann::json(9.3e18),
                                   nlohmann::json(18446744073709551615ull)}) {
    nlohmann::json j = to_json(sample_run());
    j["steps"][0]["start_offset_ns"] = bad;
    try {
      run_from_json(j);
      FAIL() << "accepted " << bad.dump();
    } catch (const Error& e) {
      EXPECT_EQ(e.name(), "InvalidRunDocument");
      EXPECT_NE(std::string(e.what()).find("64-bit integer range"), std::string::npos) << e.what();
    }
  }
}

TEST(RunJson, DocumentsWithoutAbsentProbesStillRead) {
  nlohmann::json j = to_json(sample_run());
  j.erase("absent_probes");  // written before the field existed
  EXPECT_TRUE(run_from_json(j).absent_probes.empty());
  j["absent_probes"] = {"nvml"};
  try {
    run_from_json(j);
    FAIL() << "a malformed absent_probes entry was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.name(), "InvalidRunDocument");
    EXPECT_NE(std::string(e.what()).find("$.absent_probes[0]"), std::string::npos) << e.what();
  }
}

TEST(RunJson, HostWithoutRamIsAFixedPoint) {
  // A host whose memory is unknown (no ram_bytes) reads as NaN and is written as null: the
  // document must read back to itself (the run_json fuzz target's fixed-point check aborted on
  // the NaN number written before).
  nlohmann::json j = to_json(sample_run());
  j["host"].erase("ram_bytes");
  const nlohmann::json again = to_json(run_from_json(j));
  EXPECT_TRUE(again["host"]["ram_bytes"].is_null());
  EXPECT_EQ(to_json(run_from_json(again)), again);
}

TEST(RunJson, OneStepRoundTripsAndOldDocumentsReadAsObservedIterations) {
  const genscope::Run r = sample_run();
  const nlohmann::json j = to_json(r.steps[0]);
  EXPECT_EQ(to_json(step_from_json(j)), j);
  nlohmann::json old = j;
  old["iterations"].erase("inferred");  // written before the field existed
  EXPECT_FALSE(step_from_json(old).iterations_inferred);
  old["iterations"]["inferred"] = "yes";
  EXPECT_THROW(step_from_json(old), genscope::Error);
}

TEST(RunJson, DerivedFiguresAreWritten) {
  const nlohmann::json j = to_json(sample_run());
  const nlohmann::json& s = j["steps"][0];
  EXPECT_EQ(s["metrics"][0]["delta"], 50.0);
  EXPECT_EQ(s["metrics"][0]["delta_percent"], 50.0);
  EXPECT_TRUE(s["metrics"][1]["delta"].is_null());
  EXPECT_EQ(s["iterations"]["count"], 3);
  EXPECT_EQ(s["iterations"]["first_ns"], 300.0);
  EXPECT_NEAR(s["rates"]["frames_per_second"].get<double>(), 16.0 / 1e-6, 1e-3);
  EXPECT_EQ(s["efficiency"]["cleanup_effectiveness"]["process.rss_bytes"], 0.75);
  EXPECT_EQ(s["error"]["type"], "std::runtime_error");
}

void expect_error(const nlohmann::json& j, const std::string& name, const std::string& text) {
  try {
    run_from_json(j);
    FAIL() << "expected " << name;
  } catch (const Error& e) {
    EXPECT_EQ(e.name(), name);
    EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
  }
}

TEST(RunJson, MalformedDocumentsGiveNamedErrors) {
  expect_error(nlohmann::json::array(), "InvalidRunDocument", "JSON object");
  expect_error({{"id", "x"}}, "InvalidRunDocument", "$.schema");
  expect_error({{"schema", "genscope.run/9"}}, "UnsupportedSchema", "genscope.run/9");
  nlohmann::json j = to_json(sample_run());
  j["steps"][0]["kind"] = "denoise";
  expect_error(j, "InvalidRunDocument", "$.steps[0].kind");
  j = to_json(sample_run());
  j["steps"][0]["duration_ns"] = "long";
  expect_error(j, "InvalidRunDocument", "$.steps[0].duration_ns");
  j = to_json(sample_run());
  j["series"]["values"][0] = {1};
  expect_error(j, "InvalidRunDocument", "$.series.values[0]");
  j = to_json(sample_run());
  j["steps"][0]["metrics"][0]["peak"] = "high";
  expect_error(j, "InvalidRunDocument", "$.steps[0].metrics[0].peak");
}

TEST(RunJson, FilesAreWrittenAtomicallyAndReadBack) {
  const auto path = scratch("run.json");
  write_run_file(sample_run(), path);
  const genscope::Run back = read_run_file(path);
  EXPECT_EQ(back.id, sample_run().id);
  for (const auto& entry : std::filesystem::directory_iterator(path.parent_path())) {
    EXPECT_EQ(entry.path().filename().string().find(".tmp."), std::string::npos);
  }
  try {
    write_run_file(sample_run(), scratch("no/such/dir/run.json"));
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.name(), "WriteFailed");
  }
}

TEST(RunJson, UnreadableFiles) {
  try {
    read_run_file(scratch("missing.json"));
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.name(), "ReadFailed");
  }
  const auto bad = scratch("bad.json");
  std::ofstream(bad) << "{\"schema\": ";
  try {
    read_run_file(bad);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.name(), "InvalidJson");
  }
}

TEST(Units, HumanFormatting) {
  EXPECT_EQ(format_bytes(512), "512 B");
  EXPECT_EQ(format_bytes(1536), "1.50 KiB");
  EXPECT_EQ(format_bytes(64.0 * (1 << 20), true), "+64.0 MiB");
  EXPECT_EQ(format_bytes(-3.0 * (1 << 30), true), "-3.00 GiB");
  EXPECT_EQ(format_bytes(kNaN), "n/a");
  EXPECT_EQ(format_bytes(std::numeric_limits<double>::infinity()), "n/a");
  // IEC names at every scale, the same in the console and the HTML report (issue 19); a value
  // that rounds to 1024 of a unit is shown in the next one.
  EXPECT_EQ(format_bytes(1023), "1023 B");
  EXPECT_EQ(format_bytes(1023.7 * 1024), "1.00 MiB");
  EXPECT_EQ(format_bytes(299'016'192), "285 MiB");
  EXPECT_EQ(format_bytes(5.0 * (1LL << 50)), "5.00 PiB");
  EXPECT_EQ(format_duration(850), "850 ns");
  EXPECT_EQ(format_duration(12'300, true), "12.3 us");
  EXPECT_EQ(format_duration(4'560'000), "4.56 ms");
  EXPECT_EQ(format_duration(2.45e9), "2.45 s");
  EXPECT_EQ(format_duration(182e9), "3 min 2.0 s");
}

}  // namespace
}  // namespace genscope
