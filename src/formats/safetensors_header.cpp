// SAX handler for the safetensors header (see safetensors_header.hpp).
#include "formats/safetensors_header.hpp"

#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <unordered_set>
#include <utility>
#include <vector>

namespace genscope::detail {
namespace {

using Json = nlohmann::json;

class HeaderHandler : public nlohmann::json_sax<Json> {
 public:
  explicit HeaderHandler(RawSafetensorsHeader& out) : out_(out) {}

  bool null() override { return scalar(Scalar::kOther); }
  bool boolean(bool) override { return scalar(Scalar::kOther); }
  bool number_integer(number_integer_t v) override {
    if (v >= 0) return unsigned_value(static_cast<std::uint64_t>(v));
    return scalar(Scalar::kOther);
  }
  bool number_unsigned(number_unsigned_t v) override { return unsigned_value(v); }
  bool number_float(number_float_t, const string_t&) override { return scalar(Scalar::kOther); }
  bool binary(binary_t&) override { return scalar(Scalar::kOther); }
  bool string(string_t& v) override {
    string_ = &v;
    return scalar(Scalar::kString);
  }

  bool start_object(std::size_t) override {
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
  bool start_array(std::size_t) override {
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
  bool end_object() override { return pop(); }
  bool end_array() override { return pop(); }

  bool key(string_t& k) override {
    Frame& f = stack_.back();
    switch (f.ctx) {
      case Ctx::kTop:
        if (!top_keys_.insert(k).second) note_duplicate(k);
        if (k == "__metadata__") {
          out_.has_metadata = true;
        } else {
          out_.entries.emplace_back().name = k;
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

  bool parse_error(std::size_t position, const std::string&,
                   const nlohmann::detail::exception& ex) override {
    out_.json_ok = false;
    out_.json_error_offset = position;
    out_.json_error = ex.what();
    return false;
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
  std::unordered_set<std::string> top_keys_;
  std::unordered_set<std::string> meta_keys_;
  string_t* string_ = nullptr;
  std::uint64_t unsigned_ = 0;
};

}  // namespace

RawSafetensorsHeader parse_safetensors_header(std::string_view json) {
  RawSafetensorsHeader out;
  HeaderHandler handler(out);
  const bool ok = Json::sax_parse(json.begin(), json.end(), &handler,
                                  nlohmann::detail::input_format_t::json, /*strict=*/true);
  if (!ok && out.json_ok) {
    out.json_ok = false;
    out.json_error = "JSON parse stopped";
  }
  return out;
}

}  // namespace genscope::detail
