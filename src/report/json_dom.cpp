// JsonDom: a SAX builder into a tree that frees without allocating (see json_dom.hpp).
#include "report/json_dom.hpp"

#include <vector>

namespace genscope::detail {

using nlohmann::json;

namespace {

// nlohmann's SAX interface (json_sax<json>): each value goes into the innermost open
// container, or becomes the root.
class DomBuilder {
 public:
  explicit DomBuilder(json& root) : root_(root) {}

  bool null() { return add(nullptr); }
  bool boolean(bool v) { return add(v); }
  bool number_integer(json::number_integer_t v) { return add(v); }
  bool number_unsigned(json::number_unsigned_t v) { return add(v); }
  bool number_float(json::number_float_t v, const json::string_t&) { return add(v); }
  bool string(json::string_t& v) { return add(std::move(v)); }
  bool binary(json::binary_t& v) { return add(json::binary(std::move(v))); }
  bool start_object(std::size_t) { return open(json::value_t::object); }
  bool start_array(std::size_t) { return open(json::value_t::array); }
  bool key(json::string_t& k) {
    member_ = &(*open_.back())[std::move(k)];
    return true;
  }
  bool end_object() { return close(); }
  bool end_array() { return close(); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) {
    error_ = e.what();
    return false;
  }

  const std::string& error() const { return error_; }

 private:
  template <class V>
  json* place(V&& v) {
    if (open_.empty()) {
      root_ = json(std::forward<V>(v));
      return &root_;
    }
    json& parent = *open_.back();
    if (parent.is_array()) {
      json::array_t& a = parent.get_ref<json::array_t&>();
      a.emplace_back(std::forward<V>(v));
      return &a.back();
    }
    JsonDom::release(*member_);  // a repeated key: the earlier value goes without allocating
    *member_ = json(std::forward<V>(v));
    return member_;
  }
  template <class V>
  bool add(V&& v) {
    place(std::forward<V>(v));
    return true;
  }
  bool open(json::value_t type) {
    if (open_.size() >= kMaxJsonDepth) {
      error_ = "nested deeper than " + std::to_string(kMaxJsonDepth) + " levels";
      return false;
    }
    open_.reserve(open_.size() + 1);  // a failure here leaves nothing half-placed
    open_.push_back(place(type));
    return true;
  }
  bool close() {
    open_.pop_back();
    return true;
  }

  json& root_;
  std::vector<json*> open_;  // the open containers, innermost last
  json* member_ = nullptr;   // the object member the next value goes into
  std::string error_;
};

}  // namespace

void JsonDom::release(json& v) noexcept {
  if (v.is_array()) {
    json::array_t& a = v.get_ref<json::array_t&>();
    for (json& e : a) release(e);
    a.clear();  // scalars and empty containers: nothing to allocate
  } else if (v.is_object()) {
    json::object_t& o = v.get_ref<json::object_t&>();
    for (auto& member : o) release(member.second);
    o.clear();
  }
}

std::string parse_json_dom(std::string_view text, JsonDom& dom) {
  DomBuilder builder(dom.value);
  if (json::sax_parse(text, &builder)) return {};
  return builder.error().empty() ? std::string("not valid JSON") : builder.error();
}

}  // namespace genscope::detail
