// .npy header dict parser (a small subset of Python literal syntax) and descr mapping.
#include "formats/npy_header.hpp"

#include <cctype>
#include <limits>

#include "genscope/error.hpp"

namespace genscope::detail {
namespace {

class DictParser {
 public:
  explicit DictParser(std::string_view text) : s_(text) {}

  NpyHeader parse() {
    NpyHeader h;
    bool seen_descr = false, seen_fortran = false, seen_shape = false;
    skip_ws();
    expect('{');
    while (true) {
      skip_ws();
      if (peek() == '}') break;
      const std::size_t key_at = i_;
      const std::string key = parse_string();
      skip_ws();
      expect(':');
      skip_ws();
      if (key == "descr") {
        mark(seen_descr, key, key_at);
        if (peek() == '[') {
          throw Error("NpyUnknownDescr", "structured dtypes (a list descr) are not supported");
        }
        h.descr = parse_string();
      } else if (key == "fortran_order") {
        mark(seen_fortran, key, key_at);
        h.fortran_order = parse_bool();
      } else if (key == "shape") {
        mark(seen_shape, key, key_at);
        h.shape = parse_tuple();
      } else {
        i_ = key_at;
        fail("unexpected key '" + key + "' (allowed: descr, fortran_order, shape)");
      }
      skip_ws();
      if (peek() == ',') {
        ++i_;
        continue;
      }
      if (peek() != '}') fail("expected ',' or '}'");
    }
    ++i_;
    skip_ws();
    if (i_ != s_.size()) fail("unexpected text after the header dict");
    if (!seen_descr || !seen_fortran || !seen_shape) {
      fail(std::string("missing key '") +
           (!seen_descr     ? "descr"
            : !seen_fortran ? "fortran_order"
                            : "shape") +
           "'");
    }
    return h;
  }

 private:
  [[noreturn]] void fail(const std::string& why) const {
    throw Error("NpyHeaderInvalid", why + " at header offset " + std::to_string(i_));
  }
  char peek() const { return i_ < s_.size() ? s_[i_] : '\0'; }
  void skip_ws() {
    while (i_ < s_.size() &&
           (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\t' || s_[i_] == '\r')) {
      ++i_;
    }
  }
  void expect(char c) {
    if (peek() != c || i_ >= s_.size()) fail(std::string("expected '") + c + "'");
    ++i_;
  }
  void mark(bool& seen, const std::string& key, std::size_t at) {
    if (seen) {
      i_ = at;
      fail("duplicate key '" + key + "'");
    }
    seen = true;
  }
  std::string parse_string() {
    const char quote = peek();
    if (quote != '\'' && quote != '"') fail("expected a string");
    ++i_;
    std::string out;
    while (i_ < s_.size() && s_[i_] != quote) {
      if (s_[i_] == '\\') fail("escape sequences are not supported");
      out += s_[i_++];
    }
    expect(quote);
    return out;
  }
  bool parse_bool() {
    if (s_.substr(i_, 4) == "True") {
      i_ += 4;
      return true;
    }
    if (s_.substr(i_, 5) == "False") {
      i_ += 5;
      return false;
    }
    fail("fortran_order is not True or False");
  }
  std::int64_t parse_int() {
    if (!std::isdigit(static_cast<unsigned char>(peek()))) fail("expected a non-negative integer");
    std::int64_t v = 0;
    while (std::isdigit(static_cast<unsigned char>(peek()))) {
      const int digit = peek() - '0';
      if (v > (std::numeric_limits<std::int64_t>::max() - digit) / 10) fail("dimension too large");
      v = v * 10 + digit;
      ++i_;
    }
    if (peek() == 'L') ++i_;  // Python 2 long literal, written by old NumPy
    return v;
  }
  std::vector<std::int64_t> parse_tuple() {
    expect('(');
    std::vector<std::int64_t> dims;
    skip_ws();
    if (peek() == ')') {
      ++i_;
      return dims;
    }
    while (true) {
      skip_ws();
      dims.push_back(parse_int());
      skip_ws();
      if (peek() == ')') break;
      expect(',');
      skip_ws();
      if (peek() == ')') break;
    }
    ++i_;
    return dims;
  }

  std::string_view s_;
  std::size_t i_ = 0;
};

struct DescrRow {
  char kind;
  int size;
  DType dtype;
};

constexpr DescrRow kDescrs[] = {
    {'f', 8, DType::kF64}, {'f', 4, DType::kF32}, {'f', 2, DType::kF16}, {'i', 8, DType::kI64},
    {'i', 4, DType::kI32}, {'i', 2, DType::kI16}, {'i', 1, DType::kI8},  {'u', 8, DType::kU64},
    {'u', 4, DType::kU32}, {'u', 2, DType::kU16}, {'u', 1, DType::kU8},  {'b', 1, DType::kBool},
};

}  // namespace

NpyHeader parse_npy_header(std::string_view text) { return DictParser(text).parse(); }

std::optional<NpyDescr> parse_npy_descr(std::string_view descr) noexcept {
  if (descr.size() != 3) return std::nullopt;
  const char order = descr[0];
  const int size = descr[2] - '0';
  for (const DescrRow& r : kDescrs) {
    if (r.kind != descr[1] || r.size != size) continue;
    if (order == '<' || order == '=') return NpyDescr{r.dtype, false};
    if (order == '>') return NpyDescr{r.dtype, size > 1};
    if (order == '|' && size == 1) return NpyDescr{r.dtype, false};
    return std::nullopt;
  }
  return std::nullopt;
}

std::string_view npy_descr(DType dtype) noexcept {
  switch (dtype) {
    case DType::kF64:
      return "<f8";
    case DType::kF32:
      return "<f4";
    case DType::kF16:
      return "<f2";
    case DType::kBF16:
      return "<u2";
    case DType::kF8E4M3:
      return "|u1";
    case DType::kF8E5M2:
      return "|u1";
    case DType::kI64:
      return "<i8";
    case DType::kI32:
      return "<i4";
    case DType::kI16:
      return "<i2";
    case DType::kI8:
      return "|i1";
    case DType::kU64:
      return "<u8";
    case DType::kU32:
      return "<u4";
    case DType::kU16:
      return "<u2";
    case DType::kU8:
      return "|u1";
    case DType::kBool:
      return "|b1";
  }
  return "|u1";
}

bool npy_needs_sidecar(DType dtype) noexcept {
  return dtype == DType::kBF16 || dtype == DType::kF8E4M3 || dtype == DType::kF8E5M2;
}

}  // namespace genscope::detail
