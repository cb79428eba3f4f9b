// Tests of the line handling under the recognisers: splitting on '\n' and '\r', the bound
// on line length, ANSI stripping, the anchor prefilter, number/size/clock parsing, and the
// spreading of progress readings into iterations.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "watch/anchor_filter.hpp"
#include "watch/ansi.hpp"
#include "watch/line_splitter.hpp"
#include "watch/progress_iterations.hpp"
#include "watch/text_scan.hpp"

namespace genscope::watch {
namespace {

struct Collected {
  std::string text;
  LineEnd end;
  bool cut;
  bool eager = false;
};

std::vector<Collected> split(LineSplitter& s, const std::vector<std::string>& chunks, bool flush = true) {
  std::vector<Collected> out;
  auto add = [&](std::string_view line, LineEnd end, bool cut, bool eager) {
    out.push_back({std::string(line), end, cut, eager});
  };
  for (const std::string& c : chunks) s.feed(c, add);
  if (flush) s.flush(add);
  return out;
}

TEST(LineSplitter, SplitsOnNewlineAndCarriageReturnSkippingEmptyLines) {
  LineSplitter s;
  const auto lines = split(s, {"got prompt\n\r  0%|   | 0/3 [00:00<?, ?it/s]\r 33%|#  | 1/3 [00:01<00:02,  1.0s/it]\r\n",
                               "Prompt executed in 3.00 seconds\n"});
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[0].text, "got prompt");
  EXPECT_EQ(lines[0].end, LineEnd::kNewline);
  EXPECT_EQ(lines[1].text, "  0%|   | 0/3 [00:00<?, ?it/s]");
  EXPECT_EQ(lines[1].end, LineEnd::kReturn);
  EXPECT_EQ(lines[2].text, " 33%|#  | 1/3 [00:01<00:02,  1.0s/it]");
  EXPECT_EQ(lines[2].end, LineEnd::kReturn);
  EXPECT_EQ(lines[3].text, "Prompt executed in 3.00 seconds");
}

TEST(LineSplitter, JoinsALineSplitAcrossChunksAtEveryByte) {
  const std::string text = "Requested to load SDXL\nloaded completely; 9000.00 MB usable, 4897.05 MB loaded, full load: True\n";
  for (std::size_t cut = 0; cut <= text.size(); ++cut) {
    LineSplitter s;
    const auto lines = split(s, {text.substr(0, cut), text.substr(cut)});
    ASSERT_EQ(lines.size(), 2u) << cut;
    EXPECT_EQ(lines[0].text, "Requested to load SDXL");
    EXPECT_EQ(lines[1].text.substr(0, 17), "loaded completely");
  }
}

TEST(LineSplitter, UnterminatedLastLineComesWithFlush) {
  LineSplitter s;
  std::vector<Collected> lines = split(s, {"abc\ndef"}, false);
  ASSERT_EQ(lines.size(), 1u);
  s.flush([&](std::string_view line, LineEnd end, bool cut, bool eager) {
    lines.push_back({std::string(line), end, cut, eager});
  });
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[1].text, "def");
  EXPECT_EQ(lines[1].end, LineEnd::kNone);
}

TEST(LineSplitter, OneMegabyteLineIsCutCountedAndTheNextLineIsIntact) {
  LineSplitter s(1024);
  const std::string huge(1 << 20, 'x');
  // In one chunk (fast path) and spread over many chunks (pending path).
  for (const std::size_t chunk : {std::size_t{1} << 21, std::size_t{4096}, std::size_t{1000}}) {
    LineSplitter t(1024);
    const std::string all = "head\n" + huge + "\ngot prompt\n";
    std::vector<std::string> chunks;
    for (std::size_t i = 0; i < all.size(); i += chunk) chunks.push_back(all.substr(i, chunk));
    const auto lines = split(t, chunks);
    ASSERT_EQ(lines.size(), 3u) << chunk;
    EXPECT_EQ(lines[0].text, "head");
    EXPECT_EQ(lines[1].text.size(), 1024u);
    EXPECT_TRUE(lines[1].cut);
    EXPECT_EQ(lines[2].text, "got prompt");
    EXPECT_FALSE(lines[2].cut);
    EXPECT_EQ(t.cut_lines(), 1u);
  }
}

TEST(LineSplitter, BinaryGarbageNeverExceedsTheBound) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> byte(0, 255);
  std::string garbage(1 << 18, '\0');
  for (char& c : garbage) c = static_cast<char>(byte(rng));
  LineSplitter s(512);
  std::size_t total = 0;
  std::size_t lines = 0;
  for (std::size_t i = 0; i < garbage.size(); i += 777) {
    s.feed(std::string_view(garbage).substr(i, 777), [&](std::string_view line, LineEnd, bool, bool) {
      EXPECT_LE(line.size(), 512u);
      EXPECT_EQ(line.find('\n'), std::string_view::npos);
      EXPECT_EQ(line.find('\r'), std::string_view::npos);
      total += line.size();
      ++lines;
    });
  }
  EXPECT_GT(lines, 100u);  // ~2/256 of the bytes are line ends
  EXPECT_LE(total, garbage.size());
}

TEST(LineSplitter, ProgressFramesArriveWhenWrittenNotWhenTheNextFrameEndsThem) {
  // tqdm writes "\r<frame>"; the frame's line ends only with the next write.
  LineSplitter s;
  std::vector<Collected> lines;
  auto add = [&](std::string_view line, LineEnd end, bool cut, bool eager) {
    lines.push_back({std::string(line), end, cut, eager});
  };
  s.feed("\r  0%|          | 0/20 [00:00<?, ?it/s]", add);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_TRUE(lines[0].eager);
  EXPECT_EQ(lines[0].end, LineEnd::kNone);
  EXPECT_EQ(lines[0].text, "  0%|          | 0/20 [00:00<?, ?it/s]");
  s.feed("\r  5%|5         | 1/20 [00:01<00:19,  1.00s/it]  ", add);  // padded, as tqdm does
  ASSERT_EQ(lines.size(), 2u);  // the first frame's end adds nothing
  EXPECT_TRUE(lines[1].eager);
  s.feed("\n", add);  // tqdm.close(): an empty line ended by '\n' says so
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[2].text, "");
  EXPECT_EQ(lines[2].end, LineEnd::kNewline);
  // A half-written frame waits for the rest; text appended after an eager frame comes alone.
  s.feed("\r 45%|####5     | 9/2", add);
  EXPECT_EQ(lines.size(), 3u);
  s.feed("0 [00:09<00:11,  1.00s/it]", add);
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[3].text, " 45%|####5     | 9/20 [00:09<00:11,  1.00s/it]");
  s.feed("Requested to load SDXL\n", add);
  ASSERT_EQ(lines.size(), 5u);
  EXPECT_EQ(lines[4].text, "Requested to load SDXL");
  EXPECT_FALSE(lines[4].eager);
  // stable-diffusion.cpp frames end with ESC[K; ordinary partial lines are not eager.
  s.feed("\r  |==>   | 1/20 - 1.23s/it\x1b[K", add);
  ASSERT_EQ(lines.size(), 6u);
  EXPECT_TRUE(lines[5].eager);
  s.feed("\nloading model from 'x']", add);
  EXPECT_EQ(lines.size(), 7u);  // the '\n' marker, no eager delivery of a line after '\n'
}

TEST(Ansi, StripsColoursEraseLineAndCursorMoves) {
  std::string scratch;
  EXPECT_EQ(strip_ansi("plain", scratch), "plain");
  EXPECT_EQ(strip_ansi("\x1b[34;1m[INFO ]\x1b[0m stable-diffusion.cpp:713 - loading", scratch),
            "[INFO ] stable-diffusion.cpp:713 - loading");
  EXPECT_EQ(strip_ansi("  |=====>   | 3/20 - 1.23s/it\x1b[K", scratch), "  |=====>   | 3/20 - 1.23s/it");
  EXPECT_EQ(strip_ansi("Total progress: 5%|\x1b[A", scratch), "Total progress: 5%|");
  EXPECT_EQ(strip_ansi("\x1b]0;title\x07text", scratch), "text");
  EXPECT_EQ(strip_ansi("trailing\x1b", scratch), "trailing");
  EXPECT_EQ(strip_ansi("\x1b[", scratch), "");
}

TEST(AnchorFilter, ReportsEveryRecogniserWithAnAnchorInTheLine) {
  AnchorFilter f;
  f.add("got prompt", 0);
  f.add("Prompt executed in", 0);
  f.add("it/s]", 3);
  f.add("%|", 3);
  f.add("[INFO", 1);
  f.add("x", 5);  // too short: ignored
  EXPECT_EQ(f.match("got prompt"), 1u);
  EXPECT_EQ(f.match("[2024-01-01] got prompt"), 1u);
  EXPECT_EQ(f.match(" 45%|####   | 9/20 [00:02<00:03,  3.85it/s]"), 1u << 3);
  EXPECT_EQ(f.match("[INFO ] x - got prompt"), (1u << 1) | 1u);
  EXPECT_EQ(f.match("an ordinary line of text"), 0u);
  EXPECT_EQ(f.match("got promp"), 0u);
  EXPECT_EQ(f.match(""), 0u);
  EXPECT_EQ(f.match("g"), 0u);
}

TEST(TextScan, NumbersSizesAndClocks) {
  EXPECT_EQ(parse_number("12.34"), 12.34);
  EXPECT_EQ(parse_number(" 7"), 7.0);
  EXPECT_FALSE(parse_number("12.3x"));
  EXPECT_FALSE(parse_number(""));
  EXPECT_EQ(parse_size_bytes("2.25 GiB"), 2.25 * 1024 * 1024 * 1024);
  EXPECT_EQ(parse_size_bytes("512.00 MiB. GPU 0"), 512.0 * 1024 * 1024);
  EXPECT_EQ(parse_size_bytes("20.00 MB"), 20.0 * 1024 * 1024);
  EXPECT_FALSE(parse_size_bytes("2.25 parsecs"));
  EXPECT_EQ(parse_clock_seconds("00:05"), 5.0);
  EXPECT_EQ(parse_clock_seconds("1:02:03"), 3723.0);
  EXPECT_EQ(parse_clock_seconds("00:33:04"), 1984.0);
  EXPECT_FALSE(parse_clock_seconds("1:2:3:4"));
  EXPECT_FALSE(parse_clock_seconds("?"));
  EXPECT_EQ(seconds_to_ns(1.5), 1'500'000'000);
  EXPECT_EQ(seconds_to_ns(-1), 0);
}

TEST(ProgressIterations, OneStepPerReadingIsObservedSeveralAreSpreadAndInferred) {
  ProgressIterations p;
  std::vector<std::int64_t> d;
  bool inferred = true;
  p.advance(0, 1'000, d, inferred);  // first reading: the base
  EXPECT_TRUE(d.empty());
  p.advance(1, 1'500, d, inferred);
  EXPECT_EQ(d, std::vector<std::int64_t>({500}));
  EXPECT_FALSE(inferred);
  p.advance(4, 2'501, d, inferred);
  EXPECT_EQ(d, std::vector<std::int64_t>({333, 333, 335}));  // sums to the interval exactly
  EXPECT_TRUE(inferred);
  p.advance(4, 3'000, d, inferred);
  EXPECT_TRUE(d.empty());
  p.advance(2, 3'000, d, inferred);  // backwards: nothing
  EXPECT_TRUE(d.empty());
}

}  // namespace
}  // namespace genscope::watch
