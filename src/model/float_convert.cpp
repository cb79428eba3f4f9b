// Element conversion between stored dtypes and float32.
#include "model/float_convert.hpp"

#include <cstdint>
#include <cstring>
#if defined(__x86_64__)
#include <immintrin.h>
#endif
#include <string>

#include "genscope/error.hpp"

namespace genscope::detail {

float f16_to_f32(std::uint16_t h) noexcept {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  std::uint32_t exp = (h >> 10) & 0x1fu;
  std::uint32_t mant = h & 0x3ffu;
  std::uint32_t bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  } else if (mant == 0) {
    bits = sign;
  } else {  // subnormal: value = mant * 2^-24
    float f = static_cast<float>(mant) * 5.9604644775390625e-8f;
    std::memcpy(&bits, &f, 4);
    bits |= sign;
  }
  float out;
  std::memcpy(&out, &bits, 4);
  return out;
}

std::uint16_t f32_to_f16(float value) noexcept {
  std::uint32_t x;
  std::memcpy(&x, &value, 4);
  const std::uint16_t sign = static_cast<std::uint16_t>((x >> 16) & 0x8000u);
  const std::uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) return sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u);
  if (abs >= 0x477ff000u) return sign | 0x7c00u;  // rounds to >= 65520: overflow to inf
  if (abs < 0x38800000u) {                         // below the smallest normal half
    float f;
    std::memcpy(&f, &abs, 4);
    // Adding 0.5 (2^-1) aligns the subnormal bits to the bottom of the mantissa, with the
    // FPU's round-to-nearest-even doing the rounding.
    f += 0.5f;
    std::uint32_t b;
    std::memcpy(&b, &f, 4);
    return sign | static_cast<std::uint16_t>(b - 0x3f000000u);
  }
  const std::uint32_t mant_odd = (abs >> 13) & 1u;
  std::uint32_t r = abs + 0xc8000fffu + mant_odd;  // rebias exponent (-112<<23) and round
  return sign | static_cast<std::uint16_t>(r >> 13);
}

std::uint16_t f32_to_bf16(float value) noexcept {
  std::uint32_t x;
  std::memcpy(&x, &value, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((x >> 16) | 0x40u);
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<std::uint16_t>(x >> 16);
}

bool convertible(DType dtype) noexcept {
  return dtype != DType::kF8E4M3 && dtype != DType::kF8E5M2;
}

namespace {

// Hardware half conversions (F16C) where the CPU has them, checked once at run time; else
// the portable bit manipulation above. Both round to nearest even.
#if defined(__x86_64__) && defined(__GNUC__)
#define GENSCOPE_F16C 1
__attribute__((target("avx,f16c"))) void half_to_float_f16c(const std::byte* src, float* dst,
                                                             std::size_t n) noexcept {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 2 * i));
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h));
  }
  for (; i < n; ++i) {
    std::uint16_t h;
    std::memcpy(&h, src + 2 * i, 2);
    dst[i] = f16_to_f32(h);
  }
}
__attribute__((target("avx,f16c"))) void float_to_half_f16c(const float* src, std::byte* dst,
                                                             std::size_t n) noexcept {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + 2 * i), h);
  }
  for (; i < n; ++i) {
    const std::uint16_t h = f32_to_f16(src[i]);
    std::memcpy(dst + 2 * i, &h, 2);
  }
}
bool have_f16c() noexcept {
  static const bool yes = __builtin_cpu_supports("f16c") && __builtin_cpu_supports("avx");
  return yes;
}
#endif

template <class T>
void cast_loop(const std::byte* src, std::size_t first, std::size_t count, float* dst) noexcept {
  const std::byte* p = src + first * sizeof(T);
  for (std::size_t i = 0; i < count; ++i) {
    T v;
    std::memcpy(&v, p + i * sizeof(T), sizeof(T));
    dst[i] = static_cast<float>(v);
  }
}
}  // namespace

void convert_to_f32(const std::byte* src, DType dtype, std::size_t first, std::size_t count,
                    float* dst) noexcept {
  switch (dtype) {
    case DType::kF32: std::memcpy(dst, src + first * 4, count * 4); return;
    case DType::kF16: {
      const std::byte* p = src + first * 2;
#ifdef GENSCOPE_F16C
      if (have_f16c()) {
        half_to_float_f16c(p, dst, count);
        return;
      }
#endif
      for (std::size_t i = 0; i < count; ++i) {
        std::uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        dst[i] = f16_to_f32(h);
      }
      return;
    }
    case DType::kBF16: {
      const std::byte* p = src + first * 2;
      for (std::size_t i = 0; i < count; ++i) {
        std::uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        dst[i] = bf16_to_f32(h);
      }
      return;
    }
    case DType::kF64: cast_loop<double>(src, first, count, dst); return;
    case DType::kI64: cast_loop<std::int64_t>(src, first, count, dst); return;
    case DType::kI32: cast_loop<std::int32_t>(src, first, count, dst); return;
    case DType::kI16: cast_loop<std::int16_t>(src, first, count, dst); return;
    case DType::kI8: cast_loop<std::int8_t>(src, first, count, dst); return;
    case DType::kU64: cast_loop<std::uint64_t>(src, first, count, dst); return;
    case DType::kU32: cast_loop<std::uint32_t>(src, first, count, dst); return;
    case DType::kU16: cast_loop<std::uint16_t>(src, first, count, dst); return;
    case DType::kU8:
    case DType::kBool: cast_loop<std::uint8_t>(src, first, count, dst); return;
    case DType::kF8E4M3:
    case DType::kF8E5M2: break;
  }
  for (std::size_t i = 0; i < count; ++i) dst[i] = 0.0f;  // callers check convertible()
}

void convert_from_f32(const float* src, std::size_t count, DType dtype, std::byte* dst) noexcept {
  switch (dtype) {
    case DType::kF32: std::memcpy(dst, src, count * 4); return;
    case DType::kF16:
#ifdef GENSCOPE_F16C
      if (have_f16c()) {
        float_to_half_f16c(src, dst, count);
        return;
      }
#endif
      for (std::size_t i = 0; i < count; ++i) {
        const std::uint16_t h = f32_to_f16(src[i]);
        std::memcpy(dst + 2 * i, &h, 2);
      }
      return;
    case DType::kBF16:
      for (std::size_t i = 0; i < count; ++i) {
        const std::uint16_t h = f32_to_bf16(src[i]);
        std::memcpy(dst + 2 * i, &h, 2);
      }
      return;
    case DType::kF64:
      for (std::size_t i = 0; i < count; ++i) {
        const double d = src[i];
        std::memcpy(dst + 8 * i, &d, 8);
      }
      return;
    default: break;  // merges only target float weights (checked by the caller)
  }
}

std::vector<float> tensor_to_f32(const SafetensorsFile& file, const SafetensorsEntry& entry) {
  if (!convertible(entry.dtype)) {
    throw Error("UnsupportedDType", "tensor '" + entry.name + "' has dtype " +
                                        std::string(dtype_name(entry.dtype)) +
                                        ", which cannot be converted to float32");
  }
  const std::size_t n = entry.nbytes() / dtype_size(entry.dtype);
  std::vector<float> out(n);
  convert_to_f32(file.bytes(entry).data(), entry.dtype, 0, n, out.data());
  return out;
}

double scalar_value(const SafetensorsFile& file, const SafetensorsEntry& entry) {
  if (entry.nbytes() != dtype_size(entry.dtype) || !convertible(entry.dtype)) {
    throw Error("InvalidScalar", "tensor '" + entry.name + "' is not a numeric scalar");
  }
  if (entry.dtype == DType::kF64) {
    double d;
    std::memcpy(&d, file.bytes(entry).data(), 8);
    return d;
  }
  float f;
  convert_to_f32(file.bytes(entry).data(), entry.dtype, 0, 1, &f);
  return f;
}

}  // namespace genscope::detail
