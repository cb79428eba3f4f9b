// Benchmarks of reading a watched program's output (genscope run / watch), each next to its
// peer measured in the same binary:
//   - a bare memchr('\n') line split of the same bytes: the least any line reader does
//   - LineSplitter alone ('\n' and '\r', bounded lines), no matching
//   - WatchSession::output on unknown lines (every built-in recogniser; + a rule file)
//   - WatchSession::output on recognised lines: tqdm frames (one iteration each) and ComfyUI
//     load pairs (one step opened and ended per two lines)
// The monitor has no probes and no sampler, so the figures are the reading cost alone (a
// step's probe reads are core_bench's). scripts/bench turns the JSON into docs/performance.md.
#include <benchmark/benchmark.h>

#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "genscope/genscope.hpp"
#include "watch/line_splitter.hpp"

namespace {

genscope::MonitorOptions quiet() {
  genscope::MonitorOptions o;
  o.process_probe = false;
  o.system_probe = false;
  o.nvml_probe = false;
  o.sampler = false;
  return o;
}

// ~64 KiB of log lines no recogniser reads: what a pipeline prints around its progress
// (library warnings, paths, timings), 30-140 bytes each.
const std::string& unknown_text() {
  static const std::string text = [] {
    const char* lines[] = {
        "model weight dtype torch.float16, manual cast: None",
        "model_type EPS",
        "Using pytorch attention in VAE",
        "clip missing: ['clip_l.logit_scale', 'clip_l.transformer.text_projection.weight']",
        "[2024-10-25 01:08:08.809] Starting server on 127.0.0.1:8188 with 4 workers",
        "/usr/lib/python3/dist-packages/torch/nn/modules/conv.py:456: UserWarning: Plan failed with a cudnnException",
        "  return F.conv2d(input, weight, bias, self.stride, self.padding, self.dilation, self.groups)",
        "Import times for custom nodes:",
        "   0.0 seconds: /opt/ComfyUI/custom_nodes/websocket_image_save.py",
        "INFO:httpx:HTTP Request: GET https://huggingface.co/api/models/stabilityai/sdxl \"HTTP/1.1 200 OK\"",
        "Token indices sequence length is longer than the specified maximum sequence length for this model (97 > 77)",
        "epoch 3, batch 117: loss 0.04213, lr 1.00e-04, grad norm 0.81",
    };
    std::string out;
    std::size_t i = 0;
    while (out.size() < 64 * 1024) out += std::string(lines[i++ % std::size(lines)]) + "\n";
    return out;
  }();
  return text;
}

std::size_t count_lines(const std::string& s) {
  std::size_t n = 0;
  for (char c : s) n += c == '\n' || c == '\r';
  return n;
}

void BM_BareMemchrSplit(benchmark::State& state) {
  const std::string& text = unknown_text();
  for (auto _ : state) {
    std::size_t lines = 0;
    std::size_t length = 0;
    const char* p = text.data();
    const char* end = p + text.size();
    while (p < end) {
      const char* nl = static_cast<const char*>(std::memchr(p, '\n', static_cast<std::size_t>(end - p)));
      if (nl == nullptr) break;
      length += static_cast<std::size_t>(nl - p);
      ++lines;
      p = nl + 1;
    }
    benchmark::DoNotOptimize(lines);
    benchmark::DoNotOptimize(length);
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(count_lines(text)));
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(text.size()));
}
BENCHMARK(BM_BareMemchrSplit);

void BM_LineSplitter(benchmark::State& state) {
  const std::string& text = unknown_text();
  genscope::watch::LineSplitter splitter;
  for (auto _ : state) {
    std::size_t length = 0;
    splitter.feed(text, [&](std::string_view line, genscope::watch::LineEnd, bool, bool) { length += line.size(); });
    benchmark::DoNotOptimize(length);
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(count_lines(text)));
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(text.size()));
}
BENCHMARK(BM_LineSplitter);

void session_bench(benchmark::State& state, const std::string& text, genscope::WatchOptions options,
                   int iterations_per_session) {
  options.runs = genscope::RunScope::kProgram;
  genscope::Monitor monitor(quiet());
  auto session = std::make_unique<genscope::WatchSession>(monitor, options);
  std::int64_t ts = genscope::Step::now_ns();
  session->start(ts);
  int n = 0;
  for (auto _ : state) {
    session->output(2, text, ts += 1'000'000);
    if (++n == iterations_per_session) {
      // Bound the steps and iterations held by the run.
      state.PauseTiming();
      session->program_exited(0, ts);
      session = std::make_unique<genscope::WatchSession>(monitor, options);
      session->start(ts);
      n = 0;
      state.ResumeTiming();
    }
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(count_lines(text)));
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(text.size()));
}

void BM_SessionUnknownLines(benchmark::State& state) {
  session_bench(state, unknown_text(), {}, 1 << 30);
}
BENCHMARK(BM_SessionUnknownLines);

void BM_SessionUnknownLinesWithRules(benchmark::State& state) {
  genscope::WatchOptions o;
  o.rule_files = {std::filesystem::path(GENSCOPE_BENCH_SOURCE_DIR) / "tests/fixtures/rules/mygen.rules.json"};
  session_bench(state, unknown_text(), o, 1 << 30);
}
BENCHMARK(BM_SessionUnknownLinesWithRules);

// tqdm frames of one long bar: every frame is one iteration (the bar never completes).
void BM_SessionTqdmFrames(benchmark::State& state) {
  std::string text = "\r  0%|          | 0/100000000 [00:00<?, ?it/s]";
  for (int i = 1; i <= 1000; ++i) {
    text += "\r  0%|          | " + std::to_string(i) + "/100000000 [00:01<99:59:59, 12.34it/s]";
  }
  // Each session reads the frames once (positions must advance); count the frames as lines.
  genscope::Monitor monitor(quiet());
  genscope::WatchOptions o;
  o.runs = genscope::RunScope::kProgram;
  std::int64_t ts = genscope::Step::now_ns();
  for (auto _ : state) {
    state.PauseTiming();
    auto session = std::make_unique<genscope::WatchSession>(monitor, o);
    session->start(ts);
    state.ResumeTiming();
    session->output(2, text, ts += 1'000'000);
    state.PauseTiming();
    session->program_exited(0, ts);
    session.reset();
    state.ResumeTiming();
  }
  state.SetItemsProcessed(state.iterations() * 1001);
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(text.size()));
}
BENCHMARK(BM_SessionTqdmFrames);

// ComfyUI model loads: "Requested to load" + "loaded completely" = one step opened and ended.
void BM_SessionComfyLoads(benchmark::State& state) {
  std::string text;
  for (int i = 0; i < 200; ++i) {
    text += "Requested to load SDXL\nloaded completely; 20512.45 MB usable, 4897.05 MB loaded, full load: True\n";
  }
  session_bench(state, text, {}, 64);
}
BENCHMARK(BM_SessionComfyLoads);

}  // namespace

BENCHMARK_MAIN();
