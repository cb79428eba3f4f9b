// The safetensors header's JSON: a strict event parser and the handler that records each
// entry (see safetensors_header.hpp).
#include "formats/safetensors_header.hpp"

#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

namespace genscope::detail {
namespace {

using string_t = std::string;

// Receives the events of JsonEvents (below) and records the raw header.
class HeaderHandler {
 public:
  explicit HeaderHandler(RawSafetensorsHeader& out) : out_(out) {}

  bool other_scalar() { return scalar(Scalar::kOther); }
  bool number_unsigned(std::uint64_t v) { return unsigned_value(v); }
  bool string(string_t& v) {
    string_ = &v;
    return scalar(Scalar::kString);
  }

  bool start_object() {
    if (stack_.empty()) {
      stack_.push_back({Ctx::kTop, {}});
      return true;
    }
    Frame& f = stack_.back();
    if (f.ctx == Ctx::kTop) {
      stack_.push_back({f.key == "__metadata__" ? Ctx::kMetadata : Ctx::kTensor, {}});
      return true;
    }
    mark_wrong_container();
    stack_.push_back({Ctx::kSkip, {}});
    return true;
  }
  bool start_array() {
    if (stack_.empty()) {
      out_.top_is_object = false;
      stack_.push_back({Ctx::kSkip, {}});
      return true;
    }
    Frame& f = stack_.back();
    if (f.ctx == Ctx::kTensor && f.key == "shape") {
      stack_.push_back({Ctx::kShape, {}});
      return true;
    }
    if (f.ctx == Ctx::kTensor && f.key == "data_offsets") {
      stack_.push_back({Ctx::kOffsets, {}});
      return true;
    }
    mark_wrong_container();
    stack_.push_back({Ctx::kSkip, {}});
    return true;
  }
  bool end_object() { return pop(); }
  bool end_array() { return pop(); }

  bool key(string_t& k) {
    Frame& f = stack_.back();
    switch (f.ctx) {
      case Ctx::kTop:
        // Duplicate tensor names are found by the reader's index; only __metadata__ here.
        if (k == "__metadata__") {
          if (out_.has_metadata) note_duplicate(k);
          out_.has_metadata = true;
        } else {
          // The name moves to its entry; the frame keeps only that this key is a tensor's.
          out_.entries.emplace_back().name = std::move(k);
          f.key.clear();
          return true;
        }
        break;
      case Ctx::kTensor: {
        RawSafetensorsEntry& e = out_.entries.back();
        bool* seen = nullptr;
        if (k == "dtype") seen = &e.has_dtype;
        if (k == "shape") seen = &e.has_shape;
        if (k == "data_offsets") seen = &e.has_offsets;
        if (seen == nullptr) {
          if (e.unknown_field.empty()) e.unknown_field = k;
        } else if (*seen) {
          note_duplicate(e.name + "." + k);
        }
        if (seen != nullptr) *seen = true;
        break;
      }
      case Ctx::kMetadata:
        if (!meta_keys_.insert(k).second) {
          note_duplicate("__metadata__." + k);
        }
        break;
      default:
        break;
    }
    f.key = std::move(k);
    return true;
  }

  void parse_error(std::size_t position, std::string message) {
    out_.json_ok = false;
    out_.json_error_offset = position;
    out_.json_error = std::move(message);
  }

 private:
  enum class Ctx { kTop, kTensor, kMetadata, kShape, kOffsets, kSkip };
  enum class Scalar { kString, kUnsigned, kOther };
  struct Frame {
    Ctx ctx;
    std::string key;  // current key for object contexts
  };

  bool unsigned_value(std::uint64_t v) {
    unsigned_ = v;
    return scalar(Scalar::kUnsigned);
  }

  bool pop() {
    stack_.pop_back();
    return true;
  }

  void note_duplicate(const std::string& path) {
    if (out_.duplicate_key.empty()) out_.duplicate_key = path;
  }

  void mark_metadata_bad(const std::string& why) {
    if (out_.metadata_ok) out_.metadata_problem = why;
    out_.metadata_ok = false;
  }

  // A scalar or container value in a place that wants something else.
  void mark_wrong(bool is_string) {
    if (stack_.empty()) {
      out_.top_is_object = false;
      return;
    }
    Frame& f = stack_.back();
    switch (f.ctx) {
      case Ctx::kTop:
        if (f.key == "__metadata__") {
          mark_metadata_bad("__metadata__ is not an object");
        } else {
          out_.entries.back().is_object = false;
        }
        break;
      case Ctx::kTensor: {
        RawSafetensorsEntry& e = out_.entries.back();
        if (f.key == "dtype" && !is_string) e.dtype_is_string = false;
        if (f.key == "shape") e.shape_ok = false;
        if (f.key == "data_offsets") e.offsets_ok = false;
        break;
      }
      case Ctx::kMetadata:
        mark_metadata_bad("__metadata__ value of key '" + f.key + "' is not a string");
        break;
      case Ctx::kShape:
        out_.entries.back().shape_ok = false;
        break;
      case Ctx::kOffsets:
        out_.entries.back().offsets_ok = false;
        break;
      case Ctx::kSkip:
        break;
    }
  }
  void mark_wrong_container() { mark_wrong(false); }

  bool scalar(Scalar kind) {
    if (stack_.empty()) {
      out_.top_is_object = false;
      return true;
    }
    Frame& f = stack_.back();
    switch (f.ctx) {
      case Ctx::kTensor:
        if (f.key == "dtype" && kind == Scalar::kString) {
          out_.entries.back().dtype = std::move(*string_);
          return true;
        }
        break;
      case Ctx::kMetadata:
        if (kind == Scalar::kString) {
          out_.metadata[f.key] = std::move(*string_);
          return true;
        }
        break;
      case Ctx::kShape:
        if (kind == Scalar::kUnsigned &&
            unsigned_ <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
          out_.entries.back().shape.push_back(static_cast<std::int64_t>(unsigned_));
          return true;
        }
        break;
      case Ctx::kOffsets:
        if (kind == Scalar::kUnsigned) {
          out_.entries.back().offsets.push_back(unsigned_);
          return true;
        }
        break;
      case Ctx::kSkip:
        return true;
      case Ctx::kTop:
        break;
    }
    mark_wrong(kind == Scalar::kString);
    return true;
  }

  RawSafetensorsHeader& out_;
  std::vector<Frame> stack_;
  std::unordered_set<std::string> meta_keys_;
  string_t* string_ = nullptr;
  std::uint64_t unsigned_ = 0;
};

// A strict RFC 8259 JSON reader that drives HeaderHandler directly. It replaces a general
// JSON library here because the header is the whole cost of opening a LoRA: strings without
// escapes are sliced with memchr-speed scans, integers are parsed in place, nothing else is
// built. Depth is bounded (safetensors headers are three levels deep). UTF-8 validity is
// checked by the caller beforehand; control characters inside strings are rejected here.
class JsonEvents {
 public:
  JsonEvents(std::string_view text, HeaderHandler& handler) : p_(text.data()), begin_(text.data()),
      end_(text.data() + text.size()), h_(handler) {}

  bool run() {
    skip_ws();
    if (!value(0)) return false;
    skip_ws();
    if (p_ != end_) return fail("unexpected content after the JSON value");
    return true;
  }

 private:
  static constexpr int kMaxDepth = 64;

  bool fail(const char* what) {
    h_.parse_error(static_cast<std::size_t>(p_ - begin_), std::string("syntax error: ") + what);
    return false;
  }

  void skip_ws() {
    while (p_ != end_ && (*p_ == ' ' || *p_ == '\n' || *p_ == '\r' || *p_ == '\t')) ++p_;
  }

  bool literal(const char* word) {
    const std::size_t n = std::strlen(word);
    if (static_cast<std::size_t>(end_ - p_) < n || std::memcmp(p_, word, n) != 0) {
      return fail("invalid literal");
    }
    p_ += n;
    return h_.other_scalar();
  }

  bool value(int depth) {
    if (p_ == end_) return fail("unexpected end of input");
    switch (*p_) {
      case '{': return object(depth + 1);
      case '[': return array(depth + 1);
      case '"': {
        if (!parse_string(scratch_)) return false;
        return h_.string(scratch_);
      }
      case 't': return literal("true");
      case 'f': return literal("false");
      case 'n': return literal("null");
      default: return number();
    }
  }

  bool object(int depth) {
    if (depth > kMaxDepth) return fail("nesting too deep");
    ++p_;  // '{'
    h_.start_object();
    skip_ws();
    if (p_ != end_ && *p_ == '}') {
      ++p_;
      return h_.end_object();
    }
    for (;;) {
      if (p_ == end_ || *p_ != '"') return fail("expected a string key");
      std::string key;
      if (!parse_string(key)) return false;
      h_.key(key);
      skip_ws();
      if (p_ == end_ || *p_ != ':') return fail("expected ':'");
      ++p_;
      skip_ws();
      if (!value(depth)) return false;
      skip_ws();
      if (p_ == end_) return fail("unexpected end of input in an object");
      if (*p_ == ',') {
        ++p_;
        skip_ws();
        continue;
      }
      if (*p_ == '}') {
        ++p_;
        return h_.end_object();
      }
      return fail("expected ',' or '}'");
    }
  }

  bool array(int depth) {
    if (depth > kMaxDepth) return fail("nesting too deep");
    ++p_;  // '['
    h_.start_array();
    skip_ws();
    if (p_ != end_ && *p_ == ']') {
      ++p_;
      return h_.end_array();
    }
    for (;;) {
      if (!value(depth)) return false;
      skip_ws();
      if (p_ == end_) return fail("unexpected end of input in an array");
      if (*p_ == ',') {
        ++p_;
        skip_ws();
        continue;
      }
      if (*p_ == ']') {
        ++p_;
        return h_.end_array();
      }
      return fail("expected ',' or ']'");
    }
  }

  static int hex(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }

  bool hex4(unsigned& out) {
    if (end_ - p_ < 4) return fail("truncated \\u escape");
    out = 0;
    for (int i = 0; i < 4; ++i) {
      const int d = hex(p_[i]);
      if (d < 0) return fail("invalid \\u escape");
      out = out * 16 + static_cast<unsigned>(d);
    }
    p_ += 4;
    return true;
  }

  static void append_utf8(std::string& s, unsigned cp) {
    if (cp < 0x80) {
      s += static_cast<char>(cp);
    } else if (cp < 0x800) {
      s += static_cast<char>(0xC0 | (cp >> 6));
      s += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      s += static_cast<char>(0xE0 | (cp >> 12));
      s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      s += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      s += static_cast<char>(0xF0 | (cp >> 18));
      s += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      s += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  bool parse_string(std::string& out) {
    ++p_;  // opening quote
    out.clear();
    for (;;) {
      // Copy the run up to the next quote, backslash or control character in one go.
      const char* run = p_;
      while (p_ != end_ && *p_ != '"' && *p_ != '\\' && static_cast<unsigned char>(*p_) >= 0x20) ++p_;
      out.append(run, static_cast<std::size_t>(p_ - run));
      if (p_ == end_) return fail("unterminated string");
      if (*p_ == '"') {
        ++p_;
        return true;
      }
      if (*p_ != '\\') return fail("control character in a string");
      ++p_;
      if (p_ == end_) return fail("unterminated escape");
      const char e = *p_++;
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          unsigned cp = 0;
          if (!hex4(cp)) return false;
          if (cp >= 0xDC00 && cp <= 0xDFFF) return fail("lone low surrogate");
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            unsigned low = 0;
            if (end_ - p_ < 2 || p_[0] != '\\' || p_[1] != 'u') return fail("lone high surrogate");
            p_ += 2;
            if (!hex4(low)) return false;
            if (low < 0xDC00 || low > 0xDFFF) return fail("invalid surrogate pair");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
          }
          append_utf8(out, cp);
          break;
        }
        default: return fail("invalid escape");
      }
    }
  }

  // JSON number grammar; an integer literal that fits uint64 is reported as such, anything
  // else valid (negative, fraction, exponent, too large) as another scalar.
  bool number() {
    const char* start = p_;
    bool negative = false;
    if (*p_ == '-') {
      negative = true;
      ++p_;
    }
    if (p_ == end_) return fail("invalid number");
    bool integral = true;
    bool overflow = false;
    std::uint64_t v = 0;
    if (*p_ == '0') {
      ++p_;
    } else if (*p_ >= '1' && *p_ <= '9') {
      while (p_ != end_ && *p_ >= '0' && *p_ <= '9') {
        const auto d = static_cast<std::uint64_t>(*p_ - '0');
        if (v > (std::numeric_limits<std::uint64_t>::max() - d) / 10) overflow = true;
        v = v * 10 + d;
        ++p_;
      }
    } else {
      p_ = start;
      return fail("invalid value");
    }
    if (p_ != end_ && *p_ == '.') {
      integral = false;
      ++p_;
      if (p_ == end_ || *p_ < '0' || *p_ > '9') return fail("invalid number");
      while (p_ != end_ && *p_ >= '0' && *p_ <= '9') ++p_;
    }
    if (p_ != end_ && (*p_ == 'e' || *p_ == 'E')) {
      integral = false;
      ++p_;
      if (p_ != end_ && (*p_ == '+' || *p_ == '-')) ++p_;
      if (p_ == end_ || *p_ < '0' || *p_ > '9') return fail("invalid number");
      while (p_ != end_ && *p_ >= '0' && *p_ <= '9') ++p_;
    }
    if (integral && !overflow && (!negative || v == 0)) return h_.number_unsigned(v);
    return h_.other_scalar();
  }

  const char* p_;
  const char* begin_;
  const char* end_;
  HeaderHandler& h_;
  std::string scratch_;
};

}  // namespace

RawSafetensorsHeader parse_safetensors_header(std::string_view json) {
  RawSafetensorsHeader out;
  HeaderHandler handler(out);
  const bool ok = JsonEvents(json, handler).run();
  if (!ok && out.json_ok) {
    out.json_ok = false;
    out.json_error = "JSON parse stopped";
  }
  return out;
}

}  // namespace genscope::detail
