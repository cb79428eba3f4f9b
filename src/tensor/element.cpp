// Scalar element decoding, fp8 tables and the strided gatherer.
#include "tensor/element.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>
#include <thread>

namespace genscope::detail {
namespace {

template <class T>
T load_as(const void* data, std::int64_t i) noexcept {
  T v;
  std::memcpy(&v, static_cast<const std::uint8_t*>(data) + i * sizeof(T), sizeof(T));
  return v;
}

// OCP FP8 e4m3fn: 1 sign, 4 exponent (bias 7), 3 mantissa; no infinities; S.1111.111 is NaN.
float decode_e4m3(std::uint8_t b) noexcept {
  const float sign = (b & 0x80) ? -1.0f : 1.0f;
  const int exp = (b >> 3) & 0xF;
  const int man = b & 0x7;
  if (exp == 0xF && man == 0x7) return std::numeric_limits<float>::quiet_NaN();
  if (exp == 0) return sign * std::ldexp(static_cast<float>(man), -9);  // man/8 * 2^-6
  return sign * std::ldexp(1.0f + static_cast<float>(man) / 8.0f, exp - 7);
}

// FP8 e5m2: 1 sign, 5 exponent (bias 15), 2 mantissa; IEEE-style Inf and NaN.
float decode_e5m2(std::uint8_t b) noexcept {
  const float sign = (b & 0x80) ? -1.0f : 1.0f;
  const int exp = (b >> 2) & 0x1F;
  const int man = b & 0x3;
  if (exp == 0x1F) {
    return man == 0 ? sign * std::numeric_limits<float>::infinity()
                    : std::numeric_limits<float>::quiet_NaN();
  }
  if (exp == 0) return sign * std::ldexp(static_cast<float>(man), -16);  // man/4 * 2^-14
  return sign * std::ldexp(1.0f + static_cast<float>(man) / 4.0f, exp - 15);
}

template <float (*Decode)(std::uint8_t)>
std::array<float, 256> make_table() noexcept {
  std::array<float, 256> t{};
  for (int i = 0; i < 256; ++i) t[i] = Decode(static_cast<std::uint8_t>(i));
  return t;
}

}  // namespace

float half_to_float(std::uint16_t h) noexcept {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000) << 16;
  const std::uint32_t exp = (h >> 10) & 0x1F;
  const std::uint32_t man = h & 0x3FF;
  std::uint32_t bits;
  if (exp == 0) {
    if (man == 0) {
      bits = sign;
    } else {  // subnormal: man * 2^-24
      const float f = std::ldexp(static_cast<float>(man), -24);
      std::memcpy(&bits, &f, sizeof bits);
      bits |= sign;
    }
  } else if (exp == 0x1F) {
    bits = sign | 0x7F800000u | (man << 13);
  } else {
    bits = sign | ((exp + 112) << 23) | (man << 13);
  }
  float out;
  std::memcpy(&out, &bits, sizeof out);
  return out;
}

const std::array<float, 256>& fp8_table(DType dtype) noexcept {
  static const std::array<float, 256> e4m3 = make_table<decode_e4m3>();
  static const std::array<float, 256> e5m2 = make_table<decode_e5m2>();
  assert(dtype == DType::kF8E4M3 || dtype == DType::kF8E5M2);
  return dtype == DType::kF8E4M3 ? e4m3 : e5m2;
}

double element_to_double(const void* data, std::int64_t i, DType dtype) noexcept {
  switch (dtype) {
    case DType::kF64: return load_as<double>(data, i);
    case DType::kF32: return load_as<float>(data, i);
    case DType::kF16: return half_to_float(load_as<std::uint16_t>(data, i));
    case DType::kBF16: return bf16_to_float(load_as<std::uint16_t>(data, i));
    case DType::kF8E4M3:
    case DType::kF8E5M2: return fp8_table(dtype)[load_as<std::uint8_t>(data, i)];
    case DType::kI64: return static_cast<double>(load_as<std::int64_t>(data, i));
    case DType::kI32: return load_as<std::int32_t>(data, i);
    case DType::kI16: return load_as<std::int16_t>(data, i);
    case DType::kI8: return load_as<std::int8_t>(data, i);
    case DType::kU64: return static_cast<double>(load_as<std::uint64_t>(data, i));
    case DType::kU32: return load_as<std::uint32_t>(data, i);
    case DType::kU16: return load_as<std::uint16_t>(data, i);
    case DType::kU8: return load_as<std::uint8_t>(data, i);
    case DType::kBool: return load_as<std::uint8_t>(data, i) != 0 ? 1.0 : 0.0;
  }
  return 0;
}

void to_double(const void* data, std::int64_t count, DType dtype, double* out) noexcept {
  switch (dtype) {
#define GENSCOPE_CONVERT(KIND, TYPE)                                        \
  case DType::KIND: {                                                       \
    const auto* p = static_cast<const TYPE*>(data);                         \
    for (std::int64_t i = 0; i < count; ++i) out[i] = static_cast<double>(p[i]); \
    return;                                                                 \
  }
    GENSCOPE_CONVERT(kI64, std::int64_t)
    GENSCOPE_CONVERT(kI32, std::int32_t)
    GENSCOPE_CONVERT(kI16, std::int16_t)
    GENSCOPE_CONVERT(kI8, std::int8_t)
    GENSCOPE_CONVERT(kU64, std::uint64_t)
    GENSCOPE_CONVERT(kU32, std::uint32_t)
    GENSCOPE_CONVERT(kU16, std::uint16_t)
    GENSCOPE_CONVERT(kU8, std::uint8_t)
#undef GENSCOPE_CONVERT
    case DType::kBool: {
      const auto* p = static_cast<const std::uint8_t*>(data);
      for (std::int64_t i = 0; i < count; ++i) out[i] = p[i] != 0 ? 1.0 : 0.0;
      return;
    }
    case DType::kF32: {
      const auto* p = static_cast<const float*>(data);
      for (std::int64_t i = 0; i < count; ++i) out[i] = p[i];
      return;
    }
    case DType::kF64:
      std::memcpy(out, data, static_cast<std::size_t>(count) * sizeof(double));
      return;
    default:
      for (std::int64_t i = 0; i < count; ++i) out[i] = element_to_double(data, i, dtype);
  }
}

std::vector<std::int64_t> effective_strides(const TensorView& view) {
  if (!view.strides.empty()) return view.strides;
  std::vector<std::int64_t> strides(view.shape.size());
  std::int64_t s = 1;
  for (std::size_t i = view.shape.size(); i-- > 0;) {
    strides[i] = s;
    s *= view.shape[i];
  }
  return strides;
}

Gatherer::Gatherer(const TensorView& view)
    : base_(static_cast<const std::uint8_t*>(view.data)),
      elem_bytes_(dtype_size(view.dtype)),
      shape_(view.shape),
      strides_(effective_strides(view)),
      index_(view.shape.size(), 0),
      remaining_(view.numel()) {}

namespace {

// Copies `count` elements of `Bytes` bytes spaced `stride` elements apart.
template <std::size_t Bytes>
void strided_copy(const std::uint8_t* src, std::int64_t stride, std::int64_t count,
                  std::uint8_t* dst) noexcept {
  for (std::int64_t i = 0; i < count; ++i) {
    std::memcpy(dst + i * Bytes, src + i * stride * static_cast<std::int64_t>(Bytes), Bytes);
  }
}

}  // namespace

std::int64_t Gatherer::next(void* out) {
  auto* dst = static_cast<std::uint8_t*>(out);
  std::int64_t n = 0;
  const std::size_t rank = shape_.size();
  if (rank == 0) {  // a scalar: one element
    if (remaining_ == 0) return 0;
    std::memcpy(dst, base_, elem_bytes_);
    remaining_ = 0;
    return 1;
  }
  const std::size_t last = rank - 1;
  while (remaining_ > 0 && n < kBlockElements) {
    // Copy along the innermost dimension in one typed loop, then advance the odometer.
    const std::int64_t run = std::min({shape_[last] - index_[last], kBlockElements - n, remaining_});
    const std::uint8_t* src = base_ + offset_ * static_cast<std::int64_t>(elem_bytes_);
    std::uint8_t* to = dst + n * static_cast<std::int64_t>(elem_bytes_);
    switch (elem_bytes_) {
      case 1: strided_copy<1>(src, strides_[last], run, to); break;
      case 2: strided_copy<2>(src, strides_[last], run, to); break;
      case 4: strided_copy<4>(src, strides_[last], run, to); break;
      default: strided_copy<8>(src, strides_[last], run, to); break;
    }
    n += run;
    remaining_ -= run;
    index_[last] += run;
    offset_ += run * strides_[last];
    if (index_[last] < shape_[last]) continue;
    // Row finished: carry into the outer dimensions.
    offset_ -= strides_[last] * shape_[last];
    index_[last] = 0;
    for (std::size_t d = last; d-- > 0;) {
      if (++index_[d] < shape_[d]) {
        offset_ += strides_[d];
        break;
      }
      offset_ -= strides_[d] * (shape_[d] - 1);
      index_[d] = 0;
    }
  }
  return n;
}

unsigned plan_threads(std::int64_t bytes, unsigned requested) noexcept {
  const std::int64_t by_size = std::max<std::int64_t>(1, bytes / kMinChunkBytes);
  if (by_size == 1) return 1;  // most tensors: no need to ask how many cores there are
  // glibc answers hardware_concurrency() by opening and reading /sys/devices/system/cpu/online
  // on every call (≈ 60 µs with cold caches, between a model's layers): asked once.
  static const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  const unsigned hw = requested != 0 ? requested : cores;
  return static_cast<unsigned>(std::min<std::int64_t>(hw, by_size));
}

}  // namespace genscope::detail
