// Tests of the tqdm frame parser and recogniser: frames from tqdm's format_meter (with and
// without total, SI units, desc), kinds by desc, and a real Python child drawing real tqdm
// bars through a pipe (Debian python3-tqdm): the iteration count equals the bar's total.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "watch/tqdm_frame.hpp"
#include "watch/tqdm_recognizer.hpp"
#include "watch_test_util.hpp"

namespace genscope::watch {
namespace {

TEST(TqdmFrame, ParsesTheDefaultFormatWithAndWithoutTotal) {
  auto f = parse_tqdm_frame("100%|██████████| 20/20 [00:05<00:00,  3.85it/s]");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->desc, "");
  EXPECT_EQ(f->n, 20);
  EXPECT_EQ(f->total, 20);
  EXPECT_EQ(f->unit, "it");
  EXPECT_EQ(f->elapsed_seconds, 5);
  EXPECT_TRUE(f->integral);

  f = parse_tqdm_frame("Loading pipeline components...:  43%|####2     | 3/7 [00:01<00:01,  2.60it/s]");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->desc, "Loading pipeline components...");
  EXPECT_EQ(f->n, 3);

  f = parse_tqdm_frame("  0%|          | 0/20 [00:00<?, ?it/s]");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->n, 0);
  EXPECT_EQ(f->unit, "it");

  f = parse_tqdm_frame(" 12%|█▏        | 3/25 [1:02:03<7:34:12, 1239.45s/it, loss=0.3]");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->elapsed_seconds, 3723);
  EXPECT_EQ(f->unit, "it");

  f = parse_tqdm_frame("model.safetensors: 100%|██████████| 3.44G/3.44G [00:30<00:00, 114MB/s]");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->desc, "model.safetensors");
  EXPECT_DOUBLE_EQ(f->n, 3.44e9);
  EXPECT_EQ(f->unit, "MB");
  EXPECT_FALSE(f->integral);

  f = parse_tqdm_frame("Downloading: 12it [00:01,  9.80it/s]");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->desc, "Downloading");
  EXPECT_EQ(f->n, 12);
  EXPECT_FALSE(f->total);

  f = parse_tqdm_frame(" 45%|████▌     | 9/20 [00:02<00:03,  3.85it/s]Requested to load SDXL");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->rest, "Requested to load SDXL");
}

TEST(TqdmFrame, RejectsLinesThatOnlyLookAlike) {
  for (const char* line : {"", "got prompt", "100%| done", "50%|###| 1/2", "5%|x| a/b [00:01<00:02, 1.0it/s]",
                           "  |=====>   | 3/20 - 1.23s/it", "Total: 12 items [see above]",
                           " 10%|#| 1/10 [00:01<00:09, fast]", "x [00:01, 3.2it/s"}) {
    EXPECT_FALSE(parse_tqdm_frame(line)) << line;
  }
}

TEST(TqdmFrame, CountsBeyond64BitIntegersAreNoFrame) {
  // Found by watch_output_fuzz: a Total progress bar of 7.8e44 steps was cast to long long.
  EXPECT_FALSE(parse_tqdm_frame("Total progress: 50%|#| 1/777777777777777777777777777777777777777777777 [00:01<00:01,  1.0it/s]"));
  EXPECT_FALSE(parse_tqdm_frame(" 50%|#| 1/999Y [00:01<00:01,  1.0it/s]"));
  const auto f = parse_tqdm_frame(" 50%|#| 1.5G/3.0G [00:01<00:01,  1.5GB/s]");
  ASSERT_TRUE(f);
  EXPECT_EQ(*f->total, 3e9);
}

TEST(TqdmKind, ComesFromTheDesc) {
  EXPECT_EQ(tqdm_kind_for_desc("", true), StepKind::kSampling);
  EXPECT_EQ(tqdm_kind_for_desc("Sampling", true), StepKind::kSampling);
  EXPECT_EQ(tqdm_kind_for_desc("Loading checkpoint shards", true), StepKind::kModelLoading);
  EXPECT_EQ(tqdm_kind_for_desc("Loading pipeline components...", true), StepKind::kModelLoading);
  EXPECT_EQ(tqdm_kind_for_desc("Decoding frames", true), StepKind::kVaeDecode);
  EXPECT_EQ(tqdm_kind_for_desc("epoch", true), StepKind::kCustom);
  EXPECT_EQ(tqdm_kind_for_desc("model.safetensors", false), StepKind::kCustom);
}

// A real child: Python draws real tqdm bars on stderr (through a pipe, as under genscope run).
TEST(TqdmRecognizer, RealTqdmBarsFromAChildProcess) {
  const char* script =
      "import time\n"
      "from tqdm import tqdm\n"
      "for i in tqdm(range(25)):\n"
      "    time.sleep(0.012)\n"
      "for i in tqdm(range(6), desc='Denoising'):\n"
      "    time.sleep(0.15)\n"
      "print('done', flush=True)\n";
  const std::string cmd = std::string(GENSCOPE_PYTHON) + " -c \"" + [&] {
    std::string s;
    for (const char* p = script; *p; ++p) {
      if (*p == '"' || *p == '\\' || *p == '$' || *p == '`') s += '\\';
      s += *p;
    }
    return s;
  }() + "\" 2>&1";
  testing::Harness h;
  FILE* child = popen(cmd.c_str(), "r");
  ASSERT_NE(child, nullptr);
  h.session.start(Step::now_ns());
  char buf[4096];
  std::size_t got = 0;
  std::string all;
  while ((got = std::fread(buf, 1, 1, child)) > 0) {  // byte by byte: splits frames anywhere
    h.session.output(2, std::string_view(buf, got), Step::now_ns());
    all.append(buf, got);
  }
  const int status = pclose(child);
  if (all.find("No module named 'tqdm'") != std::string::npos) GTEST_SKIP() << "python3-tqdm is not installed";
  h.session.program_exited(status, Step::now_ns());
  ASSERT_EQ(h.runs.size(), 1u);
  const genscope::Run& run = h.runs[0];
  ASSERT_EQ(run.steps.size(), 2u) << all;
  EXPECT_EQ(run.steps[0].name, "sampling");
  EXPECT_EQ(run.steps[0].kind, StepKind::kSampling);
  EXPECT_EQ(run.steps[0].iteration_ns.size(), 25u);
  EXPECT_EQ(run.steps[1].name, "Denoising");
  EXPECT_EQ(run.steps[1].iteration_ns.size(), 6u);
  EXPECT_FALSE(run.steps[1].iterations_inferred);  // 0.15 s per step > tqdm's 0.1 s throttle
  for (const auto d : run.steps[1].iteration_ns) {
    EXPECT_GT(d, 100'000'000);  // each ~0.15 s as read through the pipe
    EXPECT_LT(d, 1'000'000'000);
  }
  EXPECT_EQ(h.session.stats().runs_finished, 1u);
}

}  // namespace
}  // namespace genscope::watch
