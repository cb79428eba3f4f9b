// Tests of the safetensors reader and writer (src/formats/).
#include "genscope/safetensors.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "unit/format_test_util.hpp"

namespace genscope {
namespace {

using test::read_bytes;
using test::run_python;
using test::kAllDtypes;
using test::scratch_dir;

std::vector<std::byte> pattern(std::size_t n, int seed) {
  std::vector<std::byte> out(n);
  for (std::size_t i = 0; i < n; ++i) out[i] = std::byte((i * 7 + seed * 13 + 1) & 0xFF);
  return out;
}

// A safetensors file from a literal header (no padding) and `data_bytes` bytes of data.
std::vector<std::byte> make_file(const std::string& header, std::size_t data_bytes) {
  std::vector<std::byte> out(8 + header.size() + data_bytes, std::byte{0});
  const std::uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[i] = std::byte((n >> (8 * i)) & 0xFF);
  std::memcpy(out.data() + 8, header.data(), header.size());
  return out;
}

std::string error_name(const std::vector<std::byte>& bytes) {
  try {
    SafetensorsFile::parse(bytes);
  } catch (const Error& e) {
    return e.name();
  }
  return "ok";
}

TEST(Safetensors, RoundTripEveryDtype) {
  const auto dir = scratch_dir("st_roundtrip");
  std::vector<std::vector<std::byte>> payloads;
  std::vector<SafetensorsSource> sources;
  for (DType d : kAllDtypes) {
    const std::size_t n = 6 * dtype_size(d);
    payloads.push_back(pattern(n, static_cast<int>(d)));
  }
  for (std::size_t i = 0; i < std::size(kAllDtypes); ++i) {
    SafetensorsSource s;
    s.name = "t." + std::string(dtype_name(kAllDtypes[i]));
    s.dtype = kAllDtypes[i];
    s.shape = {2, 3};
    const std::vector<std::byte>* payload = &payloads[i];
    s.fill = [payload](std::span<std::byte> out) {
      ASSERT_EQ(out.size(), payload->size());
      std::memcpy(out.data(), payload->data(), out.size());
    };
    sources.push_back(std::move(s));
  }
  const auto path = dir / "all.safetensors";
  write_safetensors(path, sources, {{"format", "pt"}, {"note", "ünïcode \"quoted\""}});

  const SafetensorsFile file = SafetensorsFile::open(path);
  EXPECT_EQ(file.header_size() % 8, 0u);
  EXPECT_EQ(file.file_size(), std::filesystem::file_size(path));
  ASSERT_EQ(file.entries().size(), std::size(kAllDtypes));
  EXPECT_EQ(file.metadata().at("format"), "pt");
  EXPECT_EQ(file.metadata().at("note"), "ünïcode \"quoted\"");
  for (std::size_t i = 0; i < std::size(kAllDtypes); ++i) {
    const SafetensorsEntry& e = file.entries()[i];  // written order == data-offset order
    EXPECT_EQ(e.name, sources[i].name);
    EXPECT_EQ(e.dtype, kAllDtypes[i]);
    EXPECT_EQ(e.shape, (std::vector<std::int64_t>{2, 3}));
    const auto bytes = file.bytes(e);
    ASSERT_EQ(bytes.size(), payloads[i].size());
    EXPECT_EQ(std::memcmp(bytes.data(), payloads[i].data(), bytes.size()), 0) << e.name;
    const TensorView v = file.view(e);
    EXPECT_EQ(v.data, bytes.data());
    EXPECT_EQ(v.nbytes(), static_cast<std::int64_t>(bytes.size()));
    EXPECT_EQ(file.find(e.name), &e);
  }
  EXPECT_EQ(file.find("missing"), nullptr);
  // The data section starts 8-byte aligned, so F64 views are naturally aligned.
  EXPECT_EQ((8 + file.header_size()) % 8, 0u);
}

TEST(Safetensors, ScalarEmptyAndStridedSources) {
  const auto dir = scratch_dir("st_shapes");
  const float scalar = 2.5f;
  const float matrix[6] = {0, 1, 2, 3, 4, 5};  // 2x3
  TensorView s{&scalar, {}, {}, DType::kF32};
  TensorView empty{matrix, {0, 4}, {}, DType::kF32};
  TensorView transposed{matrix, {3, 2}, {1, 3}, DType::kF32};  // 3x2 view of the 2x3 data
  const auto path = dir / "shapes.safetensors";
  write_safetensors(path, {safetensors_source("scalar", s), safetensors_source("empty", empty),
                           safetensors_source("t", transposed)});
  const SafetensorsFile file = SafetensorsFile::open(path);
  ASSERT_EQ(file.entries().size(), 3u);
  const auto* e = file.find("scalar");
  ASSERT_NE(e, nullptr);
  EXPECT_TRUE(e->shape.empty());
  EXPECT_EQ(e->nbytes(), 4u);
  EXPECT_EQ(file.find("empty")->nbytes(), 0u);
  const auto t = file.bytes(*file.find("t"));
  float got[6];
  std::memcpy(got, t.data(), sizeof got);
  const float want[6] = {0, 3, 1, 4, 2, 5};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(got[i], want[i]) << i;
}

// fill_part: the tensor is asked for in consecutive parts of part_bytes (the last shorter),
// with their offsets, and the file equals a whole-tensor fill of the same bytes.
TEST(Safetensors, PartsAreFilledInOrderAndWriteTheSameBytes) {
  const auto dir = scratch_dir("st_parts");
  const std::vector<std::byte> payload = pattern(1000 * 4, 7);
  SafetensorsSource whole{"w", DType::kF32, {10, 100}, [&](std::span<std::byte> out) {
                            std::memcpy(out.data(), payload.data(), out.size());
                          }};
  SafetensorsSource parts{"w", DType::kF32, {10, 100}, nullptr};
  std::vector<std::pair<std::uint64_t, std::size_t>> asked;
  parts.part_bytes = 1200;  // 3 whole parts and a 400-byte tail
  parts.fill_part = [&](std::uint64_t offset, std::span<std::byte> out) {
    asked.emplace_back(offset, out.size());
    std::memcpy(out.data(), payload.data() + offset, out.size());
  };
  SafetensorsSource small{"s", DType::kU8, {3}, [](std::span<std::byte> out) { std::memset(out.data(), 9, 3); }};
  write_safetensors(dir / "whole.safetensors", {whole, small});
  write_safetensors(dir / "parts.safetensors", {parts, small});
  EXPECT_EQ(read_bytes(dir / "whole.safetensors"), read_bytes(dir / "parts.safetensors"));
  const std::vector<std::pair<std::uint64_t, std::size_t>> want{{0, 1200}, {1200, 1200}, {2400, 1200}, {3600, 400}};
  EXPECT_EQ(asked, want);
  SafetensorsSource no_size{"p", DType::kU8, {4}, nullptr};
  no_size.fill_part = [](std::uint64_t, std::span<std::byte>) {};
  try {
    write_safetensors(dir / "bad.safetensors", {no_size});
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.name(), "InvalidArgument");
  }
  EXPECT_FALSE(std::filesystem::exists(dir / "bad.safetensors"));
}

TEST(Safetensors, FailedFillLeavesNoFileAndKeepsTheOldOne) {
  const auto dir = scratch_dir("st_atomic");
  const auto path = dir / "out.safetensors";
  test::write_bytes(path, "previous contents");
  SafetensorsSource ok{"a", DType::kU8, {4}, [](std::span<std::byte> out) {
                         std::memset(out.data(), 1, out.size());
                       }};
  SafetensorsSource bad{"b", DType::kU8, {4}, [](std::span<std::byte>) {
                          throw std::runtime_error("producer failed");
                        }};
  EXPECT_THROW(write_safetensors(path, {ok, bad}), std::runtime_error);
  EXPECT_EQ(std::filesystem::directory_iterator(dir)->path(), path);  // no temp file left
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir),
                          std::filesystem::directory_iterator()),
            1);
  const auto kept = read_bytes(path);
  EXPECT_EQ(kept.size(), std::string("previous contents").size());

  const auto fresh = dir / "fresh.safetensors";
  EXPECT_THROW(write_safetensors(fresh, {bad}), std::runtime_error);
  EXPECT_FALSE(std::filesystem::exists(fresh));
}

TEST(Safetensors, WriterRejectsDuplicatesAndBadShapes) {
  const auto dir = scratch_dir("st_writer_errors");
  const auto path = dir / "x.safetensors";
  auto zero = [](std::span<std::byte> out) { std::memset(out.data(), 0, out.size()); };
  auto expect_name = [&](const std::vector<SafetensorsSource>& src, const char* name) {
    try {
      write_safetensors(path, src);
      ADD_FAILURE() << "no error, expected " << name;
    } catch (const Error& e) {
      EXPECT_EQ(e.name(), name) << e.what();
    }
    EXPECT_FALSE(std::filesystem::exists(path));
  };
  expect_name({{"a", DType::kF32, {1}, zero}, {"a", DType::kF32, {1}, zero}}, "DuplicateKey");
  expect_name({{"__metadata__", DType::kF32, {1}, zero}}, "DuplicateKey");
  expect_name({{"a", DType::kF32, {-1}, zero}}, "InvalidShape");
  expect_name({{"a", DType::kF64, {1ll << 40, 1ll << 40}, zero}}, "SizeOverflow");
  expect_name({{"bad\xff", DType::kF32, {1}, zero}}, "InvalidHeaderUtf8");
}

TEST(Safetensors, ReadsAFileWrittenByPython) {
  const auto dir = scratch_dir("st_python_writes");
  // A hand-written safetensors writer: header keys not in offset order, no padding.
  const std::string script = R"PY(
import json, struct, sys
import numpy as np
a = (np.arange(6, dtype=np.float32) * 0.5).reshape(2, 3)
b = np.array([-1, 2**40], dtype=np.int64)
c = np.array([0x3f80, 0xc000, 0x7fc0], dtype=np.uint16)  # bf16 bits of 1, -2, nan
blobs = [("b", "I64", b), ("a", "F32", a), ("c", "BF16", c)]
header, data, off = {}, b"", 0
for name, dt, arr in blobs:
    raw = arr.tobytes()
    header[name] = {"dtype": dt, "shape": list(arr.shape), "data_offsets": [off, off + len(raw)]}
    data += raw
    off += len(raw)
header = dict(sorted(header.items()))  # 'a' first in the header, 'b' first in the data
header["__metadata__"] = {"source": "python"}
h = json.dumps(header).encode()
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<Q", len(h)) + h + data)
)PY";
  const auto path = dir / "py.safetensors";
  ASSERT_EQ(run_python(dir, script, path.string()), 0);
  const SafetensorsFile file = SafetensorsFile::open(path);
  ASSERT_EQ(file.entries().size(), 3u);
  EXPECT_EQ(file.entries()[0].name, "b");  // data-offset order
  EXPECT_EQ(file.metadata().at("source"), "python");
  const auto* a = file.find("a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->shape, (std::vector<std::int64_t>{2, 3}));
  float av[6];
  std::memcpy(av, file.bytes(*a).data(), sizeof av);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(av[i], 0.5f * static_cast<float>(i));
  std::int64_t bv[2];
  std::memcpy(bv, file.bytes(*file.find("b")).data(), sizeof bv);
  EXPECT_EQ(bv[0], -1);
  EXPECT_EQ(bv[1], 1ll << 40);
  const auto* c = file.find("c");
  EXPECT_EQ(c->dtype, DType::kBF16);
  std::uint16_t cv[3];
  std::memcpy(cv, file.bytes(*c).data(), sizeof cv);
  EXPECT_EQ(cv[0], 0x3f80);
  EXPECT_EQ(cv[2], 0x7fc0);
}

TEST(Safetensors, PythonReadsOurFile) {
  const auto dir = scratch_dir("st_python_reads");
  const double d[3] = {1.5, -2.25, 1e300};
  const std::int32_t i[4] = {1, -2, 3, -4};
  const auto path = dir / "ours.safetensors";
  write_safetensors(path,
                    {safetensors_source("d", {d, {3}, {}, DType::kF64}),
                     safetensors_source("i", {i, {2, 2}, {}, DType::kI32})},
                    {{"k", "v"}});
  const std::string script = R"PY(
import json, struct, sys
import numpy as np
raw = open(sys.argv[1], "rb").read()
(n,) = struct.unpack("<Q", raw[:8])
assert n % 8 == 0, n
header = json.loads(raw[8:8 + n])
data = raw[8 + n:]
assert header["__metadata__"] == {"k": "v"}, header
types = {"F64": np.float64, "I32": np.int32}
def get(name):
    e = header[name]
    b, end = e["data_offsets"]
    return np.frombuffer(data[b:end], dtype=types[e["dtype"]]).reshape(e["shape"])
assert np.array_equal(get("d"), np.array([1.5, -2.25, 1e300]))
assert np.array_equal(get("i"), np.array([[1, -2], [3, -4]], dtype=np.int32))
assert header["i"]["data_offsets"][1] == len(data)
print("ok")
)PY";
  std::string out;
  EXPECT_EQ(run_python(dir, script, path.string(), &out), 0) << out;
  EXPECT_EQ(out, "ok\n");
}

TEST(Safetensors, ValidationOrderAndMessages) {
  // Several problems at once: the earlier check in the documented order wins.
  EXPECT_EQ(error_name(make_file(R"({"a":{"dtype":"X","shape":[1],"data_offsets":[0,1]},)"
                                 R"("a":{"dtype":"X","shape":[1],"data_offsets":[0,1]}})",
                                 1)),
            "DuplicateKey");
  EXPECT_EQ(error_name(make_file(R"({"a":{"dtype":"Q8","shape":[-1],"data_offsets":[1,0]}})", 0)),
            "UnknownDtype");
  EXPECT_EQ(error_name(make_file(R"({"a":{"dtype":"U8","shape":[-1],"data_offsets":[1,0]}})", 0)),
            "InvalidShape");
  EXPECT_EQ(error_name(make_file(R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},)"
                                 R"("__metadata__":{"x":1}})",
                                 3)),
            "TrailingBytes");
  EXPECT_EQ(error_name(make_file(R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},)"
                                 R"("__metadata__":{"x":1}})",
                                 2)),
            "InvalidMetadata");
  EXPECT_EQ(error_name(make_file(R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}}   )", 2)),
            "ok");
  EXPECT_EQ(error_name(make_file("{}", 0)), "ok");
  try {
    SafetensorsFile::parse(make_file(R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},)"
                                     R"("b":{"dtype":"U8","shape":[2],"data_offsets":[1,3]}})",
                                     3));
    FAIL() << "overlap accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.name(), "InvalidOffset");
    EXPECT_NE(std::string(e.what()).find("'b'"), std::string::npos) << e.what();
  }
  try {
    SafetensorsFile::open("/nonexistent/x.safetensors");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.name(), "OpenFailed");
  }
}

}  // namespace
}  // namespace genscope
