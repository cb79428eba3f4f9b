// Tests of the console report: human units (never raw nanoseconds or exponent notation), the
// curated section of every known attachment type built by the real producers, the time of
// exact peaks taken from the sampled series, absent probes in the header, --verbose, --plain.
#include <gtest/gtest.h>

#include <cmath>
#include <regex>
#include <string>
#include <vector>

#include "genscope/genscope.hpp"
#include "genscope/lora_report.hpp"
#include "genscope/tensor_analysis.hpp"
#include "genscope/tensor_compare.hpp"
#include "genscope/text_analysis.hpp"
#include "genscope/usage_stats.hpp"
#include "genscope/validation.hpp"
#include "report/console_style.hpp"
#include "report/json_fields.hpp"

namespace genscope {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

bool has_exponent(const std::string& text) {
  static const std::regex exponent(R"((^|[^0-9A-Za-z])[0-9]+(\.[0-9]+)?[eE][+-]?[0-9]+\b)");
  return std::regex_search(text, exponent);
}

bool is_ascii(const std::string& text) {
  for (unsigned char c : text) {
    if (c > 0x7F) return false;
  }
  return true;
}

genscope::Run base_run() {
  genscope::Run r;
  r.id = "0123456789abcdef0123456789abcdef";
  r.start_utc = "2026-11-21T12:00:00.000Z";
  r.duration_ns = 2'000'000'000;
  r.genscope_version = "0.1.0";
  r.host = {"box", "Test CPU", 2, 24.0 * (1 << 30), "Linux 6.1"};
  r.probes = {"process", "system"};
  return r;
}

StepRecord step(int id, const char* name, std::int64_t start_ns, std::int64_t duration_ns) {
  StepRecord s;
  s.id = id;
  s.name = name;
  s.kind = StepKind::kCustom;
  s.status = StepStatus::kOk;
  s.start_offset_ns = start_ns;
  s.duration_ns = duration_ns;
  return s;
}

TEST(ReportUnits, NumbersNeverUseExponentNotation) {
  EXPECT_EQ(detail::format_number(0.5), "0.5");
  EXPECT_EQ(detail::format_number(12.5), "12.5");
  EXPECT_EQ(detail::format_number(-3.14159), "-3.142");
  EXPECT_EQ(detail::format_number(4602222881.0), "4602222881");
  EXPECT_EQ(detail::format_number(3.2e-7), "0.00000032");
  EXPECT_EQ(detail::format_number(1.5e20), "150000000000000000000");
  EXPECT_EQ(detail::format_number(2e-15), "< 0.000000000001");
  EXPECT_EQ(detail::format_count(65536), "65,536");
  EXPECT_EQ(detail::format_count(-1234567), "-1,234,567");
  for (double v : {1e-30, 3e-9, 1.234e-5, 0.1, 7.0, 1e6 + 0.5, 3.06045e+08, 1e15 + 0.25, 1e300}) {
    EXPECT_FALSE(has_exponent(detail::format_number(v))) << detail::format_number(v);
    EXPECT_FALSE(has_exponent(detail::format_count(v))) << detail::format_count(v);
  }
}

TEST(ReportUnits, FieldsGetHumanUnitsByKeySuffix) {
  using detail::format_field;
  using nlohmann::json;
  EXPECT_EQ(format_field("average_inference_time_ns", json(4602222881LL), false), "4.60 s");
  EXPECT_EQ(format_field("process.rss_bytes", json(3.06045e+08), false), "292 MiB");
  EXPECT_EQ(format_field("initialization_seconds", json(1.5), false), "1.50 s");
  EXPECT_EQ(format_field("read_ms", json(12.5), false), "12.50 ms");
  EXPECT_EQ(format_field("allocated_change_mb", json(512.0), false), "512 MiB");
  EXPECT_EQ(format_field("peak_memory_usage_gb", json(1.5), false), "1.50 GiB");
  EXPECT_EQ(format_field("system.used_percent", json(9.94), false), "9.9%");
  EXPECT_EQ(format_field("tokens_per_second", json(25900.0), false), "25.9k/s");
  EXPECT_EQ(format_field("gpu0.temperature_celsius", json(61), true), "61 C");
  EXPECT_EQ(format_field("timestamp", json(1795000000.5), false), "2026-11-18T11:06:40Z");
  EXPECT_EQ(format_field("total_patched_keys", json(264), false), "264");
  EXPECT_EQ(format_field("parameters", json(1034959), false), "1,034,959");
  EXPECT_EQ(format_field("model_id", json(94582744866768LL), false), "94582744866768");
  EXPECT_EQ(format_field("shape", json({1, 4, 64, 64}), false), "[1, 4, 64, 64]");
  EXPECT_EQ(format_field("durations_ns", json({1000000, 2500000}), false), "[1.00 ms, 2.50 ms]");
  EXPECT_EQ(format_field("fits", json(true), false), "yes");
  EXPECT_EQ(format_field("rank", json(nullptr), false), "n/a");
}

// The issue's own example: a generic attachment once printed raw nanoseconds and floats in
// exponent notation.
TEST(ConsoleReport, UnknownAttachmentIsReadable) {
  const Attachment a{"custom_stats",
                     "from a plugin",
                     {{"average_inference_time_ns", 4602222881LL},
                      {"peak_memory", {{"process.rss_bytes", 3.06045e+08}}},
                      {"mean_error", 1.234e-7},
                      {"big_table", nlohmann::json::array({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12,
                                                           13, 14, 15, 16, 17, 18, 19, 20})}}};
  const std::string text = render_attachment(a);
  EXPECT_NE(text.find("custom_stats \"from a plugin\""), std::string::npos) << text;
  EXPECT_NE(text.find("average_inference_time_ns: 4.60 s"), std::string::npos) << text;
  EXPECT_NE(text.find("process.rss_bytes: 292 MiB"), std::string::npos) << text;
  EXPECT_NE(text.find("mean_error: 0.00000012"), std::string::npos) << text;
  EXPECT_NE(text.find("big_table: [20 items]"), std::string::npos) << text;
  EXPECT_EQ(text.find("4602222881"), std::string::npos) << text;
  EXPECT_FALSE(has_exponent(text)) << text;
  // --verbose shows every item.
  const std::string full = render_attachment(a, {.verbose = true});
  EXPECT_NE(full.find("big_table:\n"), std::string::npos) << full;
  EXPECT_NE(full.find("     - 20\n"), std::string::npos) << full;
}

// Every known attachment type, each built by its real producer where the library has one.
std::vector<Attachment> every_known_attachment() {
  std::vector<Attachment> out;
  static const std::vector<float> values = {0.5f, -1.25f, 2.0f, 0.0f, 3.5f, -0.75f, 1.0f, 0.25f};
  TensorView v{values.data(), {1, 2, 2, 2}, {}, DType::kF32, "cpu"};
  out.push_back({"tensor", "sampled latent", tensor_analysis_json(v, TensorRole::kLatent)});
  nlohmann::json latent = tensor_analysis_json(v, TensorRole::kLatent);
  latent["latent_kind"] = "image";
  latent["latent_layout"] = "(B,C,H,W)";
  latent["strategy"] = "tiled";
  latent["input"] = {{"frames", 1}, {"height", 16}, {"width", 16}, {"channels", 3}, {"bytes", 3072}};
  latent["spatial_compression"] = 64.0;
  out.push_back({"latent", "initial latent", latent});
  std::vector<float> other = values;
  other[2] = 2.5f;
  TensorView w{other.data(), {1, 2, 2, 2}, {}, DType::kF32, "cpu"};
  out.push_back({"tensor_comparison", "latent vs reference", comparison_json(compare_tensors(w, v))});
  out.push_back({"text", "positive prompt",
                 text_analysis_json(analyze_text("a photo of a cat, oil painting",
                                                 {.tokens = 9, .duration_ns = 2'000'000}))});
  out.push_back({"outputs", "images",
                 {{"files", {{{"path", "out/image.png"}, {"bytes", 11585}}}},
                  {"xxh3_64", "3ef7bb7604ca1605"},
                  {"width", 64},
                  {"height", 64}}});
  out.push_back({"model_component", "unet",
                 {{"component", "unet"}, {"file", "unet.safetensors"}, {"file_size_bytes", 3072000},
                  {"tensors", 210}, {"parameters", 761316}, {"dtype", "F32"}, {"device", "cpu"},
                  {"generated", true}, {"generate_ns", 1'500'000'000LL}, {"read_ns", 26'750'000}}});
  ModelSnapshot before;
  before.id = "0x55d0";
  before.class_name = "UNetModel";
  before.load_device = "cuda:0";
  before.offload_device = "cpu";
  before.patches_uuid = "11111111-2222-4333-8444-555555555555";
  before.parameters["diffusion_model.out.weight"] = {{4, 320, 3, 3}, DType::kF16, "cpu", 23040, {}};
  ModelSnapshot after = before;
  after.id = "0x77e0";
  after.patches_count = 2;
  after.patches_uuid = "99999999-8888-4777-8666-555555555555";
  nlohmann::json snapshot;
  to_json(snapshot, after);
  out.push_back({"model_snapshot", "unet after LoRA", snapshot});
  nlohmann::json before_json;
  to_json(before_json, before);
  out.push_back({"model_state", "models", {{"unet", before_json}}});
  LoraApplicationObservation o;
  o.lora_path = "/loras/style.safetensors";  // does not exist: the report says MISSING
  o.unet_before = before;
  o.unet_after = after;
  LoraFit fit;
  fit.lora_keys_not_loaded = {"lora_te2_text_model_encoder_layers_0_mlp_fc1"};
  fit.not_loaded = {"diffusion_model.input_blocks.4.1.proj_in.weight"};
  fit.verdict = "this LoRA was trained for SDXL; the base is SD1.x";
  o.fit = fit;
  o.memory_allocated_before_bytes = 1024 * kMiB;
  o.memory_allocated_after_bytes = 1536 * kMiB;
  o.memory_reserved_before_bytes = 2048 * kMiB;
  o.memory_reserved_after_bytes = 2048 * kMiB;
  o.success = true;
  o.models_returned = 2;
  out.push_back(lora_application_attachment(o));
  UsageTracker usage;
  usage.set_device("Fake H100");
  usage.record_initialization(1'250'000'000);
  usage.record_generation(4'602'222'881, 306'045'000, 200'000'000);
  out.push_back({"usage", "", usage.to_json()});
  out.push_back({"usage_statistics", "usage statistics",
                 {{"initialization_time_ns", 29'530'000}, {"total_generated", 1},
                  {"output_kind", "image"}, {"total_inference_time_ns", 4'602'222'881LL},
                  {"average_inference_time_ns", 4'602'222'881LL},
                  {"peak_memory", {{"process.rss_bytes", 3.06045e+08}, {"system.total_bytes", 2.5e10}}},
                  {"memory_after_component_load",
                   {{{"stage", "after load unet"}, {"memory", {{"process.rss_bytes", 1.59e8}}}}}},
                  {"device_name", "cpu"}, {"wall_ns", 5'000'000'000LL}}});
  genscope::Run timed = base_run();
  timed.steps.push_back(step(0, "sampling", 0, 1'000'000'000));
  out.push_back(performance_attachment(timed, Targets::defaults()));
  return out;
}

TEST(ConsoleReport, EveryKnownAttachmentHasItsCuratedSection) {
  const std::vector<std::pair<std::string, std::string>> headings = {
      {"tensor", "TENSOR \"sampled latent\" (latent)"},
      {"latent", "LATENT \"initial latent\": Image latent (B,C,H,W)"},
      {"tensor_comparison", "COMPARISON \"latent vs reference\": DIFFERS"},
      {"text", "TEXT \"positive prompt\": \"a photo of a cat, oil painting\""},
      {"outputs", "OUTPUTS \"images\": 1 file(s), 11.3 KiB, 64x64, xxh3 3ef7bb7604ca1605"},
      {"model_component", "COMPONENT \"unet\": 2.93 MiB, 210 tensors, 761,316 parameters, F32 on cpu"},
      {"model_snapshot", "MODEL SNAPSHOT \"unet after LoRA\": UNetModel (id 0x77e0)"},
      {"model_state", "MODEL STATE \"models\""},
      {"lora_application", "LORA APPLICATION \"style.safetensors\": applied"},
      {"usage", "MODEL USAGE STATISTICS (every run of this monitor so far)"},
      {"usage_statistics", "MODEL USAGE STATISTICS (this run)"},
      {"performance", "PERFORMANCE VALIDATION: target met, score"},
  };
  const std::vector<Attachment> all = every_known_attachment();
  ASSERT_EQ(all.size(), headings.size());
  for (std::size_t i = 0; i < all.size(); ++i) {
    ASSERT_EQ(all[i].type, headings[i].first);
    const std::string text = render_attachment(all[i], {.plain = true});
    EXPECT_NE(text.find(headings[i].second), std::string::npos) << text;
    EXPECT_FALSE(has_exponent(text)) << text;
    EXPECT_TRUE(is_ascii(text)) << text;
    // Curated, not the generic tree: no raw key: value dump of the data.
    EXPECT_EQ(text.find("* " + all[i].type), std::string::npos) << text;
    EXPECT_EQ(text.find("data:"), std::string::npos) << text;
    const std::string verbose = render_attachment(all[i], {.plain = true, .verbose = true});
    EXPECT_NE(verbose.find("   data:\n"), std::string::npos) << verbose;
    EXPECT_GT(verbose.size(), text.size());
  }
}

TEST(ConsoleReport, CuratedSectionsCarryTheSeedFigures) {
  std::map<std::string, std::string> text;
  for (const Attachment& a : every_known_attachment()) text[a.type] = render_attachment(a, {.plain = true});
  // Seed 000: text processing, tokens and rate.
  EXPECT_NE(text["text"].find("30 characters, 7 words, 1 special characters; 9 tokens"),
            std::string::npos) << text["text"];
  EXPECT_NE(text["text"].find("Encoding rate: 15.0k characters/s, 4500 tokens/s"), std::string::npos)
      << text["text"];
  // Seed 001: latent strategy, input and ratios.
  EXPECT_NE(text["latent"].find("Strategy used: tiled"), std::string::npos);
  EXPECT_NE(text["latent"].find("Input: 1 frame(s) of 16x16, 3 channels, 3.00 KiB"), std::string::npos)
      << text["latent"];
  // Seed 002: identity, UUID change, not-loaded keys, memory impact, verdict.
  const std::string& lora = text["lora_application"];
  EXPECT_NE(lora.find("LoRA file: style.safetensors (MISSING)"), std::string::npos) << lora;
  // The library's layout has the identity diff but not the UUIDs after the application.
  EXPECT_NE(lora.find("UNet: cloned, patched keys 0 -> 2 (+2), patches UUID changed, class unchanged"),
            std::string::npos)
      << lora;
  EXPECT_EQ(lora.find("Patched keys:"), std::string::npos) << lora;  // no patcher was given
  EXPECT_NE(lora.find("! lora key not loaded (1):\n      lora_te2_text_model_encoder_layers_0_mlp_fc1"),
            std::string::npos)
      << lora;
  EXPECT_NE(lora.find("! NOT LOADED (1):\n      diffusion_model.input_blocks.4.1.proj_in.weight"),
            std::string::npos)
      << lora;
  EXPECT_NE(lora.find("verdict: this LoRA was trained for SDXL; the base is SD1.x"), std::string::npos);
  EXPECT_NE(lora.find("Memory: allocated +512 MiB, reserved 0 B (now 1.50 GiB allocated, 2.00 GiB reserved)"),
            std::string::npos)
      << lora;
  EXPECT_NE(lora.find("Placement: model cpu, load cuda:0, offload cpu (unchanged)"), std::string::npos)
      << lora;
  // Seed 003: the usage block in human units.
  const std::string& usage = text["usage_statistics"];
  EXPECT_NE(usage.find("Total Images Generated: 1"), std::string::npos) << usage;
  EXPECT_NE(usage.find("Average Inference Time: 4.60 s"), std::string::npos) << usage;
  EXPECT_NE(usage.find("Peak Memory Usage: RAM (process RSS) 292 MiB\n"), std::string::npos) << usage;
  EXPECT_NE(usage.find("after load unet: RAM (process RSS) 152 MiB"), std::string::npos) << usage;
  EXPECT_NE(text["usage"].find("Average Inference Time: 4.60 s"), std::string::npos) << text["usage"];
  EXPECT_NE(text["model_component"].find("(generated in 1.50 s, then read in 26.75 ms)"),
            std::string::npos)
      << text["model_component"];
}

// The reference pipeline's own "lora_application" layout (integrations/libtorch/reference).
TEST(ConsoleReport, PipelineLoraLayoutShowsKeysNotLoaded) {
  const Attachment a{
      "lora_application",
      "lora_unet",
      {{"lora_file", {{"filename", "lora_unet.safetensors"}, {"file_exists", true}, {"file_size_bytes", 80486}}},
       {"strength_model", 0.8},
       {"strength_clip", 0.0},
       {"baseline", {{"unet", {{"patches_uuid", "aaaaaaaa-1"}, {"device", "cpu"}}}}},
       {"modified", {{"unet", {{"patches_uuid", "bbbbbbbb-2"}, {"device", "cpu"}}}}},
       {"identity", {{"model_cloned", true}, {"class_changed", false}, {"patches_added", 2},
                     {"uuid_changed", true}, {"original_patch_count", 0}, {"modified_patch_count", 2}}},
       {"weights", {{"keys_added", nlohmann::json::array()}, {"keys_removed", nlohmann::json::array()},
                    {"keys_common", 210},
                    {"changes", {{"a.weight", {{"values_changed", true}}},
                                 {"b.weight", {{"values_changed", true}, {"dtype_changed", true}}}}}}},
       {"patches", {{"total_patched_keys", 2}, {"targeted_keys", {"a.weight", "b.weight"}},
                    {"patch_details", {{"a.weight", {{"patch_type", "lora"}, {"rank", 4}, {"strength_patch", 0.8}}},
                                       {"b.weight", {{"patch_type", "lora"}, {"rank", 4}, {"strength_patch", 0.8}}}}}}},
       {"key_mapping", {{"lora_modules", 3}, {"mapped_keys", 2}, {"lora_keys_not_loaded", {"lora_unet_extra"}},
                        {"architecture_fits", false}}},
       {"placement", {{"original_device", "cpu"}, {"modified_device", "cuda:0"}, {"model_device_changed", true},
                      {"clip_model_device", "cpu"}, {"clip_patcher_load_device", "cpu"},
                      {"clip_patcher_offload_device", "cpu"}}}}};
  const std::string text = render_attachment(a, {.plain = true});
  EXPECT_NE(text.find("applied, strength model 0.8, clip 0"), std::string::npos) << text;
  EXPECT_NE(text.find("patches UUID changed (aaaaaaaa... -> bbbbbbbb...)"), std::string::npos) << text;
  EXPECT_NE(text.find("Patched keys: 2 (lora x2), rank 4, strength 0.8\n      a.weight\n      b.weight\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("Weights: 2 of 210 common keys changed value; 0 added, 0 removed; 0 shape, 1 dtype, "
                      "0 device changes"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("Key mapping: 3 LoRA modules -> 2 model keys; 1 LoRA keys not loaded; the LoRA does "
                      "NOT fit this model"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("! lora key not loaded (1):\n      lora_unet_extra\n"), std::string::npos) << text;
  EXPECT_NE(text.find("Placement: model cpu -> cuda:0 (CHANGED); CLIP on cpu (load cpu, offload cpu)"),
            std::string::npos)
      << text;
}

// A VmHWM peak has no time; the report takes the time of the highest sample inside the step.
TEST(ConsoleReport, ExactPeakWithoutTimeTakesTheHighestSample) {
  genscope::Run r = base_run();
  StepRecord s = step(0, "decode", 100'000'000, 50'000'000);
  s.metrics.push_back({"process.rss_bytes", Unit::kBytes, 100 * kMiB, 110 * kMiB, 200 * kMiB, -1, "exact"});
  r.steps.push_back(s);
  StepRecord spike = step(1, "spike", 200'000'000, 2'000'000);  // between two samples
  spike.metrics.push_back({"process.rss_bytes", Unit::kBytes, 100 * kMiB, 100 * kMiB, 300 * kMiB, -1, "exact"});
  r.steps.push_back(spike);
  r.series.metrics = {"process.rss_bytes"};
  r.series.units = {Unit::kBytes};
  // 90 ms is before the step and higher than anything inside it; 160 ms is after it.
  r.series.offset_ns = {90'000'000, 110'000'000, 130'000'000, 140'000'000, 160'000'000, 250'000'000};
  r.series.values = {500 * kMiB, 150 * kMiB, 180 * kMiB, 170 * kMiB, 400 * kMiB, 100 * kMiB};
  r.series.interval_ns = 20'000'000;
  r.series.samples_taken = 6;
  std::string text = render_console(r, {.plain = true});
  EXPECT_NE(text.find("100 MiB -> 200 MiB (exact; time sampled: highest sample 180 MiB at 30.00 ms) -> 110 MiB"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("300 MiB (exact; no sample inside the step, so no time)"), std::string::npos) << text;
  EXPECT_EQ(text.find("time unknown"), std::string::npos) << text;
  EXPECT_NE(text.find("Peak RAM (process RSS): 300 MiB in spike\n"), std::string::npos) << text;
  // When the highest sample is the peak itself, only its time is given.
  r.steps[0].metrics[0].peak = 180 * kMiB;
  text = render_console(r, {.plain = true});
  EXPECT_NE(text.find("-> 180 MiB (exact; time sampled: at 30.00 ms) ->"), std::string::npos) << text;
  // The run summary gives the run-relative time and says it is sampled.
  r.steps.pop_back();
  text = render_console(r, {.plain = true});
  EXPECT_NE(text.find("Peak RAM (process RSS): 180 MiB in decode at +130.00 ms (time sampled)"),
            std::string::npos)
      << text;
}

TEST(ConsoleReport, AbsentProbeIsOneHeaderLineNotAMonitoringError) {
  genscope::Run r = base_run();
  r.absent_probes = {{"nvml", "no NVIDIA driver library (libnvidia-ml.so.1 not found)"},
                     {"allocator", "no framework allocator registered"}};
  const std::string plain = render_console(r, {.plain = true});
  EXPECT_NE(plain.find("\nGPU: none (no NVIDIA driver library (libnvidia-ml.so.1 not found))\n"),
            std::string::npos)
      << plain;
  EXPECT_NE(plain.find("\nProbe allocator absent: no framework allocator registered\n"), std::string::npos)
      << plain;
  EXPECT_EQ(plain.find("MONITORING ERRORS"), std::string::npos) << plain;
  const std::string emoji = render_console(r);
  EXPECT_NE(emoji.find("ℹ️  GPU: none ("), std::string::npos) << emoji;
  // A failing probe still is an error, and the header points at it.
  r.absent_probes.clear();
  r.monitoring_errors.push_back({"nvml", "probe unavailable: nvmlInit_v2 failed: Unknown Error", 0, ""});
  const std::string failed = render_console(r, {.plain = true});
  EXPECT_NE(failed.find("GPU: none seen (the nvml probe failed: see MONITORING ERRORS)"), std::string::npos);
  EXPECT_NE(failed.find("MONITORING ERRORS"), std::string::npos);
}

TEST(ConsoleReport, GpuFiguresHaveTheirOwnBlockAndPlainStaysAscii) {
  genscope::Run r = base_run();
  r.gpus.push_back({0, "Fake H100", "GPU-1", "550.54", 80.0 * (1 << 30)});
  StepRecord s = step(0, "sampling", 0, 1'000'000'000);
  s.metrics.push_back({"gpu0.used_bytes", Unit::kBytes, 1024 * kMiB, 2048 * kMiB, 4096 * kMiB, 250'000'000, "sampled"});
  s.metrics.push_back({"gpu0.utilization_percent", Unit::kPercent, 10, 95, 99, 500'000'000, "sampled"});
  s.metrics.push_back({"gpu0.temperature_celsius", Unit::kCelsius, 55, 61, 62, 900'000'000, "sampled"});
  s.metrics.push_back({"system.used_percent", Unit::kPercent, 9.9, 9.9, 9.9, 0, "sampled"});
  s.metrics.push_back({"system.total_bytes", Unit::kBytes, 2e10, 2e10, 2e10, 0, "sampled"});
  r.steps.push_back(s);
  const std::string text = render_console(r, {.plain = true});
  EXPECT_NE(text.find("GPU 0 memory used (whole device)  1.00 GiB -> 4.00 GiB (at 250.00 ms, sampled) -> 2.00 GiB"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("GPU 0 (before -> peak -> after)\n       utilisation  10.0% -> 99.0% (at 500.00 ms, "
                      "sampled) -> 95.0%"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("temperature  55 C -> 62 C (at 900.00 ms, sampled) -> 61 C"), std::string::npos) << text;
  EXPECT_TRUE(is_ascii(text)) << text;
  // Constants and the percentage duplicate of "system used" only with --verbose.
  EXPECT_EQ(text.find("RAM usage"), std::string::npos) << text;
  EXPECT_EQ(text.find("RAM (system total)"), std::string::npos) << text;
  const std::string verbose = render_console(r, {.plain = true, .verbose = true});
  EXPECT_NE(verbose.find("RAM usage"), std::string::npos);
  EXPECT_NE(verbose.find("RAM (system total)"), std::string::npos);
  EXPECT_NE(render_console(r).find("55 °C"), std::string::npos);
}

TEST(ConsoleReport, WholeReportWithEveryAttachmentIsReadableAscii) {
  genscope::Run r = base_run();
  StepRecord s = step(0, "everything", 0, 1'000'000'000);
  s.labels = {{"strategy", "tiled"}};
  s.counters = {{"frames", 16}, {"bytes", 12.0 * kMiB}};
  s.iteration_ns = {13'000'000, 6'000'000, 6'100'000};
  s.attachments = every_known_attachment();
  r.steps.push_back(s);
  const std::string text = render_console(r, {.plain = true});
  EXPECT_TRUE(is_ascii(text));
  EXPECT_FALSE(has_exponent(text)) << text;
  EXPECT_NE(text.find("    Labels: strategy=tiled\n"), std::string::npos) << text;
  EXPECT_NE(text.find("frames: 16  (16 frames/s)"), std::string::npos) << text;
  const std::string verbose = render_console(r, {.plain = true, .verbose = true});
  EXPECT_TRUE(is_ascii(verbose));
  EXPECT_FALSE(has_exponent(verbose)) << verbose;
}

}  // namespace
}  // namespace genscope
