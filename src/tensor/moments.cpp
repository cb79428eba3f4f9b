// Moments merging and the scalar fallback used for tails and non-finite blocks.
#include "tensor/moments.hpp"

#include <algorithm>
#include <cmath>

#include "tensor/element.hpp"

namespace genscope::detail {

void Moments::merge(const Moments& o) noexcept {
  nan += o.nan;
  pos_inf += o.pos_inf;
  neg_inf += o.neg_inf;
  zeros += o.zeros;
  if (o.n == 0) return;
  if (n == 0) {
    n = o.n;
    mean = o.mean;
    m2 = o.m2;
    min = o.min;
    max = o.max;
    return;
  }
  const double na = static_cast<double>(n);
  const double nb = static_cast<double>(o.n);
  const double nt = na + nb;
  const double delta = o.mean - mean;
  mean += delta * (nb / nt);
  m2 += o.m2 + delta * delta * (na * nb / nt);
  n += o.n;
  min = std::min(min, o.min);
  max = std::max(max, o.max);
}

Moments scalar_moments(const void* data, std::int64_t begin, std::int64_t count,
                       DType dtype) noexcept {
  Moments m;
  double shift = 0;
  double s = 0;
  double q = 0;
  for (std::int64_t i = 0; i < count; ++i) {
    const double x = element_to_double(data, begin + i, dtype);
    if (std::isnan(x)) {
      ++m.nan;
      continue;
    }
    if (std::isinf(x)) {
      ++(x > 0 ? m.pos_inf : m.neg_inf);
      continue;
    }
    if (x == 0) ++m.zeros;
    if (m.n == 0) shift = x;  // shifting by a sample keeps s and q small (no cancellation)
    const double d = x - shift;
    s += d;
    q += d * d;
    ++m.n;
    m.min = std::min(m.min, x);
    m.max = std::max(m.max, x);
  }
  if (m.n > 0) {
    const double n = static_cast<double>(m.n);
    m.mean = shift + s / n;
    m.m2 = std::max(0.0, q - s * s / n);
  }
  return m;
}

}  // namespace genscope::detail
