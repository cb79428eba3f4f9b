// Console rendering of model attachments: a loaded component file ("model_component"),
// seed 000's model state of each model ("model_state": identity, class, placement, patches)
// and model snapshots ("model_snapshot", model_snapshot.hpp's JSON form).
#include <cmath>

#include "report/console_style.hpp"
#include "report/json_fields.hpp"

namespace genscope::detail {
namespace {

using nlohmann::json;

}  // namespace

std::string model_state_text(const json& m, const ConsoleStyle& s) {
  if (!m.is_object()) return "n/a";
  std::string t = field_text(m, "class");
  if (t.empty()) t = "model";
  const json* id = field(m, "model_id");
  if (id != nullptr && !id->is_null()) t += " (id " + format_field("model_id", *id, s.plain) + ")";
  t += " on " + (field_text(m, "device").empty() ? "?" : field_text(m, "device"));
  const std::string load = field_text(m, "load_device");
  const std::string offload = field_text(m, "offload_device");
  if (!load.empty() || !offload.empty()) {
    t += " (load " + (load.empty() ? "?" : load) + ", offload " + (offload.empty() ? "?" : offload) + ")";
  }
  // ComfyUI names the CLIP patcher's figures patcher_patches_*; seed 002 keeps both spellings.
  double patches = field_number(m, "patches_count");
  if (std::isnan(patches)) patches = field_number(m, "patcher_patches_count");
  std::string uuid = field_text(m, "patches_uuid");
  if (uuid.empty()) uuid = field_text(m, "patcher_patches_uuid");
  if (!std::isnan(patches)) t += ", " + format_count(patches) + " patched keys";
  if (!uuid.empty()) t += ", patches UUID " + uuid;
  return t;
}

void render_component_attachment(std::string& out, const Attachment& a, const ConsoleStyle& s,
                                 const std::string& indent) {
  const json& d = a.data;
  const std::string in = indent + "   ";
  std::string name = field_text(d, "component");
  if (name.empty()) name = a.name;
  out += indent + s.mark("🧩 ", "") + "COMPONENT \"" + name + "\": " +
         format_bytes(field_number(d, "file_size_bytes")) + ", " +
         format_count(field_number(d, "tensors")) + " tensors, " +
         format_count(field_number(d, "parameters")) + " parameters";
  if (!field_text(d, "dtype").empty()) out += ", " + field_text(d, "dtype");
  if (!field_text(d, "device").empty()) out += " on " + field_text(d, "device");
  out += "\n";
  std::string how;
  if (field_bool(d, "generated")) {
    how = "generated in " + s.duration(field_number(d, "generate_ns")) + ", then ";
  }
  if (!std::isnan(field_number(d, "read_ns"))) how += "read in " + s.duration(field_number(d, "read_ns"));
  out += in + "file: " + field_text(d, "file") + (how.empty() ? "" : " (" + how + ")") + "\n";
}

void render_model_state_attachment(std::string& out, const Attachment& a, const ConsoleStyle& s,
                                   const std::string& indent) {
  out += indent + s.mark("🔧 ", "") + "MODEL STATE" + (a.name.empty() ? "" : " \"" + a.name + "\"") +
         "\n";
  for (auto it = a.data.begin(); it != a.data.end(); ++it) {
    out += indent + "   " + it.key() + ": " + model_state_text(it.value(), s) + "\n";
  }
}

void render_snapshot_attachment(std::string& out, const Attachment& a, const ConsoleStyle& s,
                                const std::string& indent) {
  const json& d = a.data;
  out += indent + s.mark("🔧 ", "") + "MODEL SNAPSHOT" +
         (a.name.empty() ? "" : " \"" + a.name + "\"") + ": " + model_state_text(d, s) + "\n";
  double count = field_number(d, "parameter_count");
  if (std::isnan(count)) count = static_cast<double>(field_size(d, "parameters"));
  out += indent + "   parameters: " + format_count(count) + " tensors, " +
         format_count(field_number(d, "total_elements")) + " elements, " +
         format_bytes(field_number(d, "total_bytes")) + "\n";
}

}  // namespace genscope::detail
