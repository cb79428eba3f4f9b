// Tests of the .npy reader and writer (src/formats/), cross-checked with real NumPy.
#include "genscope/npy.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "unit/format_test_util.hpp"

namespace genscope {
namespace {

using test::read_bytes;
using test::run_python;
using test::kAllDtypes;
using test::scratch_dir;

std::vector<std::byte> pattern(std::size_t n, DType d) {
  std::vector<std::byte> out(n);
  for (std::size_t i = 0; i < n; ++i) {
    out[i] = d == DType::kBool ? std::byte(i % 3 == 0) : std::byte((i * 29 + 3) & 0xFF);
  }
  return out;
}

std::string error_name(const std::string& bytes) {
  try {
    parse_npy(std::as_bytes(std::span<const char>(bytes.data(), bytes.size())));
  } catch (const Error& e) {
    return e.name();
  }
  return "ok";
}

TEST(Npy, RoundTripEveryDtype) {
  const auto dir = scratch_dir("npy_roundtrip");
  for (DType d : kAllDtypes) {
    const auto payload = pattern(12 * dtype_size(d), d);
    const TensorView v{payload.data(), {3, 4}, {}, d};
    const auto path = dir / (std::string(dtype_name(d)) + ".npy");
    write_npy(path, v);
    const auto raw = read_bytes(path);
    EXPECT_EQ((raw.size() - payload.size()) % 64, 0u) << "data not 64-byte aligned";
    EXPECT_EQ(std::filesystem::exists(npy_sidecar_path(path)),
              d == DType::kBF16 || d == DType::kF8E4M3 || d == DType::kF8E5M2);
    const NpyArray a = read_npy(path);
    EXPECT_EQ(a.dtype(), d) << dtype_name(d);
    EXPECT_EQ(a.shape(), (std::vector<std::int64_t>{3, 4}));
    EXPECT_EQ(a.version(), 1);
    EXPECT_FALSE(a.fortran_order());
    ASSERT_EQ(a.bytes().size(), payload.size());
    EXPECT_EQ(std::memcmp(a.bytes().data(), payload.data(), payload.size()), 0);
    EXPECT_TRUE(a.view().is_contiguous());
    // parse_npy needs the stored dtype given explicitly (no sidecar for a buffer).
    const NpyArray b = parse_npy(raw);
    EXPECT_EQ(dtype_size(b.dtype()), dtype_size(d));
  }
}

TEST(Npy, NumpyLoadsOurFiles) {
  const auto dir = scratch_dir("npy_numpy_loads");
  const float f[6] = {0.f, 0.25f, -1.5f, 3e38f, -0.f, 7.f};
  write_npy(dir / "f4.npy", {f, {2, 3}, {}, DType::kF32});
  write_npy(dir / "f4t.npy", {f, {3, 2}, {1, 3}, DType::kF32});  // transpose, copied to C order
  const std::int64_t i8[3] = {-1, 1ll << 50, 7};
  write_npy(dir / "i8.npy", {i8, {3}, {}, DType::kI64});
  const double scalar = 2.5;
  write_npy(dir / "scalar.npy", {&scalar, {}, {}, DType::kF64});
  write_npy(dir / "empty.npy", {f, {0, 4}, {}, DType::kF32});
  const std::uint8_t b[4] = {1, 0, 0, 1};
  write_npy(dir / "bool.npy", {b, {2, 2}, {}, DType::kBool});
  const std::uint16_t bf[2] = {0x3f80, 0xc000};
  write_npy(dir / "bf16.npy", {bf, {2}, {}, DType::kBF16});
  const std::uint16_t h[3] = {0x3c00, 0xc000, 0x7c00};  // 1, -2, inf
  write_npy(dir / "f2.npy", {h, {3}, {}, DType::kF16});
  const std::string script = R"PY(
import json, sys
import numpy as np
d = sys.argv[1]
def load(name, dtype, shape):
    a = np.load(d + "/" + name)
    assert a.dtype == np.dtype(dtype), (name, a.dtype)
    assert a.shape == shape, (name, a.shape)
    return a
f = np.array([0, 0.25, -1.5, 3e38, -0.0, 7], dtype=np.float32)
assert np.array_equal(load("f4.npy", "<f4", (2, 3)), f.reshape(2, 3))
assert np.array_equal(load("f4t.npy", "<f4", (3, 2)), f.reshape(2, 3).T)
assert np.array_equal(load("i8.npy", "<i8", (3,)), np.array([-1, 2**50, 7]))
assert load("scalar.npy", "<f8", ()) == 2.5
load("empty.npy", "<f4", (0, 4))
assert np.array_equal(load("bool.npy", "|b1", (2, 2)), np.array([[True, False], [False, True]]))
bf = load("bf16.npy", "<u2", (2,))
assert json.load(open(d + "/bf16.npy.dtype.json")) == {"dtype": "BF16"}
as_f32 = (bf.astype(np.uint32) << 16).view(np.float32)
assert np.array_equal(as_f32, np.array([1.0, -2.0], dtype=np.float32)), as_f32
assert np.array_equal(load("f2.npy", "<f2", (3,)), np.array([1, -2, np.inf], dtype=np.float16))
print("ok")
)PY";
  std::string out;
  EXPECT_EQ(run_python(dir, script, dir.string(), &out), 0) << out;
  EXPECT_EQ(out, "ok\n");
}

TEST(Npy, ReadsFilesNumpyWrites) {
  const auto dir = scratch_dir("npy_numpy_writes");
  const std::string script = R"PY(
import sys
import numpy as np
from numpy.lib import format as fmt
d = sys.argv[1]
a = (np.arange(6, dtype=np.float32) * 0.5 - 1).reshape(2, 3)
np.save(d + "/le_f4.npy", a)
np.save(d + "/be_f4.npy", a.astype(">f4"))
np.save(d + "/be_i8.npy", np.array([-2, 2**40, 3], dtype=">i8"))
np.save(d + "/fortran_f8.npy", np.asfortranarray(a.astype(np.float64)))
np.save(d + "/bool.npy", np.array([True, False, True]))
np.save(d + "/u1.npy", np.arange(5, dtype=np.uint8))
np.save(d + "/scalar.npy", np.float64(3.25))
for v in [(2, 0), (3, 0)]:
    with open(d + "/v%d.npy" % v[0], "wb") as f:
        fmt.write_array(f, a, version=v)
np.save(d + "/c8.npy", np.zeros(2, dtype=np.complex64))
)PY";
  ASSERT_EQ(run_python(dir, script, dir.string()), 0);
  const float want[6] = {-1.f, -0.5f, 0.f, 0.5f, 1.f, 1.5f};
  for (const char* name : {"le_f4.npy", "be_f4.npy", "v2.npy", "v3.npy"}) {
    const NpyArray a = read_npy(dir / name);
    EXPECT_EQ(a.dtype(), DType::kF32) << name;
    EXPECT_EQ(a.shape(), (std::vector<std::int64_t>{2, 3})) << name;
    float got[6];
    ASSERT_EQ(a.bytes().size(), sizeof got);
    std::memcpy(got, a.bytes().data(), sizeof got);
    for (int i = 0; i < 6; ++i) EXPECT_EQ(got[i], want[i]) << name << " " << i;
  }
  EXPECT_EQ(read_npy(dir / "be_f4.npy").descr(), ">f4");
  EXPECT_EQ(read_npy(dir / "v2.npy").version(), 2);
  EXPECT_EQ(read_npy(dir / "v3.npy").version(), 3);

  const NpyArray be = read_npy(dir / "be_i8.npy");
  std::int64_t i8[3];
  std::memcpy(i8, be.bytes().data(), sizeof i8);
  EXPECT_EQ(i8[0], -2);
  EXPECT_EQ(i8[1], 1ll << 40);

  const NpyArray f = read_npy(dir / "fortran_f8.npy");
  EXPECT_TRUE(f.fortran_order());
  const TensorView v = f.view();
  EXPECT_EQ(v.strides, (std::vector<std::int64_t>{1, 2}));
  EXPECT_FALSE(v.is_contiguous());
  const auto* p = static_cast<const double*>(v.data);
  for (int r = 0; r < 2; ++r) {
    for (int c = 0; c < 3; ++c) {
      EXPECT_EQ(p[r * v.strides[0] + c * v.strides[1]], want[r * 3 + c]) << r << "," << c;
    }
  }
  EXPECT_EQ(read_npy(dir / "bool.npy").dtype(), DType::kBool);
  EXPECT_EQ(read_npy(dir / "u1.npy").bytes().size(), 5u);
  EXPECT_TRUE(read_npy(dir / "scalar.npy").shape().empty());
  try {
    read_npy(dir / "c8.npy");
    FAIL() << "complex64 accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.name(), "NpyUnknownDescr");
  }
}

TEST(Npy, LongHeaderUsesVersion2) {
  const auto dir = scratch_dir("npy_v2");
  const std::uint8_t one = 42;
  TensorView v{&one, std::vector<std::int64_t>(23000, 1), {}, DType::kU8};
  const auto path = dir / "long.npy";
  write_npy(path, v);
  const auto raw = read_bytes(path);
  EXPECT_EQ(std::to_integer<int>(raw[6]), 2);
  EXPECT_EQ((raw.size() - 1) % 64, 0u);
  const NpyArray a = read_npy(path);
  EXPECT_EQ(a.version(), 2);
  EXPECT_EQ(a.shape().size(), 23000u);
  EXPECT_EQ(std::to_integer<int>(a.bytes()[0]), 42);
}

TEST(Npy, SidecarRules) {
  const auto dir = scratch_dir("npy_sidecar");
  const auto path = dir / "x.npy";
  const std::uint8_t bits[2] = {0x38, 0xC0};
  write_npy(path, {bits, {2}, {}, DType::kF8E4M3});
  EXPECT_EQ(read_npy(path).dtype(), DType::kF8E4M3);
  write_npy(path, {bits, {2}, {}, DType::kU8});  // replaces the data: stale sidecar goes
  EXPECT_FALSE(std::filesystem::exists(npy_sidecar_path(path)));
  EXPECT_EQ(read_npy(path).dtype(), DType::kU8);

  const float f[1] = {1.f};
  write_npy(path, {f, {1}, {}, DType::kF32});
  test::write_bytes(npy_sidecar_path(path), R"({"dtype": "BF16"})");
  try {
    read_npy(path);  // BF16 cannot reinterpret '<f4'
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.name(), "NpySidecarInvalid");
  }
  test::write_bytes(npy_sidecar_path(path), "not json");
  try {
    read_npy(path);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.name(), "NpySidecarInvalid");
  }
  const std::uint16_t u2[1] = {0x3f80};
  write_npy(dir / "y.npy", {u2, {1}, {}, DType::kU16});
  const auto raw = read_bytes(dir / "y.npy");
  EXPECT_EQ(parse_npy(raw, DType::kBF16).dtype(), DType::kBF16);
  EXPECT_EQ(parse_npy(raw).dtype(), DType::kU16);
}

TEST(Npy, WriteIntoMissingFolderFails) {
  const float f[1] = {1.f};
  const auto path = scratch_dir("npy_missing") / "no" / "such" / "x.npy";
  try {
    write_npy(path, {f, {1}, {}, DType::kF32});
    FAIL() << "write into a missing folder succeeded";
  } catch (const Error& e) {
    EXPECT_EQ(e.name(), "WriteFailed");
    EXPECT_NE(std::string(e.what()).find("x.npy"), std::string::npos) << e.what();
  }
  try {
    read_npy(path);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.name(), "OpenFailed");
  }
}

TEST(Npy, HeaderErrors) {
  auto file = [](const std::string& dict, std::size_t data_bytes, char major = 1) {
    std::string h = dict + "\n";
    std::string out("\x93NUMPY", 6);
    out += major;
    out += '\0';
    out += static_cast<char>(h.size() & 0xFF);
    out += static_cast<char>(h.size() >> 8);
    if (major != 1) out += std::string(2, '\0');
    return out + h + std::string(data_bytes, '\0');
  };
  const std::string ok = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }";
  EXPECT_EQ(error_name(file(ok, 8)), "ok");
  EXPECT_EQ(error_name(file(ok, 8, 2)), "ok");
  EXPECT_EQ(error_name(file(ok, 7)), "NpyTruncated");
  EXPECT_EQ(error_name(file(ok, 9)), "NpyTrailingBytes");
  EXPECT_EQ(error_name(file(ok, 8, 4)), "NpyUnsupportedVersion");
  EXPECT_EQ(error_name("\x93NUMPZ\x01"), "NpyBadMagic");
  EXPECT_EQ(error_name(""), "NpyBadMagic");
  EXPECT_EQ(error_name("\x93NUM"), "NpyTruncated");
  EXPECT_EQ(error_name(file("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}", 8)),
            "NpyHeaderInvalid");
  EXPECT_EQ(error_name(file("{'descr': '<f4', 'shape': (2,)}", 8)), "NpyHeaderInvalid");
  EXPECT_EQ(error_name(file("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, "
                            "'shape': (2,)}",
                            8)),
            "NpyHeaderInvalid");
  EXPECT_EQ(error_name(file("{'descr': '<f4', 'fortran_order': False, 'shape': (-2,)}", 8)),
            "NpyHeaderInvalid");
  EXPECT_EQ(error_name(file("{'descr': '<c8', 'fortran_order': False, 'shape': (1,)}", 8)),
            "NpyUnknownDescr");
  EXPECT_EQ(error_name(file("{'descr': '|f4', 'fortran_order': False, 'shape': (1,)}", 4)),
            "NpyUnknownDescr");
  EXPECT_EQ(error_name(file("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,)}", 4)),
            "NpyUnknownDescr");
  EXPECT_EQ(error_name(file("{'descr': '<f4', 'fortran_order': False, "
                            "'shape': (4294967296, 4294967296, 4294967296)}",
                            0)),
            "NpyHeaderInvalid");
}

}  // namespace
}  // namespace genscope
