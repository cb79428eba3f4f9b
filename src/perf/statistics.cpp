// Robust statistics used by comparisons and regression detection.
#include "genscope/statistics.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace genscope {
namespace {

constexpr double kNan = std::numeric_limits<double>::quiet_NaN();

double sorted_median(std::vector<double>& v) {
  const std::size_t n = v.size();
  std::nth_element(v.begin(), v.begin() + n / 2, v.end());
  const double hi = v[n / 2];
  if (n % 2 == 1) return hi;
  const double lo = *std::max_element(v.begin(), v.begin() + n / 2);
  return 0.5 * (lo + hi);
}

// Number of arrangements giving each U for sample sizes (n1, n2), no ties:
// f(n1, n2, u) = f(n1 - 1, n2, u - n2) + f(n1, n2 - 1, u).
std::vector<double> exact_u_distribution(std::size_t n1, std::size_t n2) {
  const std::size_t max_u = n1 * n2;
  // table[i][j] is the distribution for sizes (i, j).
  std::vector<std::vector<std::vector<double>>> table(
      n1 + 1, std::vector<std::vector<double>>(n2 + 1));
  for (std::size_t i = 0; i <= n1; ++i) {
    for (std::size_t j = 0; j <= n2; ++j) {
      auto& d = table[i][j];
      d.assign(i * j + 1, 0.0);
      if (i == 0 || j == 0) {
        d[0] = 1;
        continue;
      }
      const auto& a = table[i - 1][j];
      const auto& b = table[i][j - 1];
      for (std::size_t u = 0; u < d.size(); ++u) {
        if (u >= j && u - j < a.size()) d[u] += a[u - j];
        if (u < b.size()) d[u] += b[u];
      }
    }
  }
  auto result = table[n1][n2];
  result.resize(max_u + 1);
  return result;
}

double normal_sf(double z) { return 0.5 * std::erfc(z / std::sqrt(2.0)); }

struct SplitMix {
  std::uint64_t state;
  std::uint64_t next() {
    std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
};

}  // namespace

double median(std::span<const double> values) {
  if (values.empty()) return kNan;
  std::vector<double> v(values.begin(), values.end());
  return sorted_median(v);
}

double median_absolute_deviation(std::span<const double> values) {
  if (values.empty()) return kNan;
  const double m = median(values);
  std::vector<double> dev;
  dev.reserve(values.size());
  for (double x : values) dev.push_back(std::fabs(x - m));
  return sorted_median(dev);
}

double mean(std::span<const double> values) {
  if (values.empty()) return kNan;
  double sum = 0;
  for (double x : values) sum += x;
  return sum / static_cast<double>(values.size());
}

double coefficient_of_variation(std::span<const double> values) {
  if (values.size() < 2) return kNan;
  const double m = mean(values);
  double ss = 0;
  for (double x : values) ss += (x - m) * (x - m);
  const double sd = std::sqrt(ss / static_cast<double>(values.size() - 1));
  return m == 0 ? kNan : sd / m;
}

MannWhitney mann_whitney_u(std::span<const double> a, std::span<const double> b) {
  MannWhitney result;
  const std::size_t n1 = a.size(), n2 = b.size();
  if (n1 == 0 || n2 == 0) return result;
  // Ranks of the pooled sample, ties get their average rank.
  std::vector<std::pair<double, int>> pooled;
  pooled.reserve(n1 + n2);
  for (double x : a) pooled.emplace_back(x, 0);
  for (double x : b) pooled.emplace_back(x, 1);
  std::sort(pooled.begin(), pooled.end(),
            [](const auto& l, const auto& r) { return l.first < r.first; });
  const double n = static_cast<double>(n1 + n2);
  double rank_sum_a = 0, tie_term = 0;
  bool ties = false;
  for (std::size_t i = 0; i < pooled.size();) {
    std::size_t j = i;
    while (j < pooled.size() && pooled[j].first == pooled[i].first) ++j;
    const double t = static_cast<double>(j - i);
    const double avg_rank = 0.5 * (static_cast<double>(i + 1) + static_cast<double>(j));
    for (std::size_t k = i; k < j; ++k)
      if (pooled[k].second == 0) rank_sum_a += avg_rank;
    if (t > 1) {
      ties = true;
      tie_term += t * t * t - t;
    }
    i = j;
  }
  const double dn1 = static_cast<double>(n1), dn2 = static_cast<double>(n2);
  result.u = rank_sum_a - dn1 * (dn1 + 1) / 2;
  if (!ties && n1 * n2 <= 400) {
    const auto dist = exact_u_distribution(n1, n2);
    double total = 0, below = 0, above = 0;
    const auto u = static_cast<std::size_t>(std::llround(result.u));
    for (std::size_t k = 0; k < dist.size(); ++k) {
      total += dist[k];
      if (k <= u) below += dist[k];
      if (k >= u) above += dist[k];
    }
    result.p_value = std::min(1.0, 2 * std::min(below, above) / total);
    return result;
  }
  const double mu = dn1 * dn2 / 2;
  const double sigma2 = dn1 * dn2 / 12 * ((n + 1) - tie_term / (n * (n - 1)));
  if (sigma2 <= 0) {
    result.p_value = 1;
    return result;
  }
  const double z = (std::fabs(result.u - mu) - 0.5) / std::sqrt(sigma2);
  result.p_value = std::min(1.0, 2 * normal_sf(std::max(0.0, z)));
  return result;
}

Interval bootstrap_median_ratio(std::span<const double> a, std::span<const double> b,
                                double confidence, int resamples, std::uint64_t seed) {
  Interval interval{kNan, kNan};
  if (a.empty() || b.empty() || resamples < 10) return interval;
  SplitMix rng{seed};
  std::vector<double> ratios, ra(a.size()), rb(b.size());
  ratios.reserve(static_cast<std::size_t>(resamples));
  for (int r = 0; r < resamples; ++r) {
    for (auto& x : ra) x = a[rng.next() % a.size()];
    for (auto& x : rb) x = b[rng.next() % b.size()];
    const double ma = sorted_median(ra);
    if (ma != 0) ratios.push_back(sorted_median(rb) / ma);
  }
  if (ratios.empty()) return interval;
  std::sort(ratios.begin(), ratios.end());
  const double tail = (1 - confidence) / 2;
  const auto index = [&](double q) {
    const auto i = static_cast<std::size_t>(q * static_cast<double>(ratios.size() - 1));
    return ratios[std::min(i, ratios.size() - 1)];
  };
  interval.low = index(tail);
  interval.high = index(1 - tail);
  return interval;
}

}  // namespace genscope
