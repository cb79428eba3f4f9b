// Attachments in the console report: each known type has a curated section (the seeds'
// layouts); any other type is shown as its data tree in human units. --verbose adds the full
// data tree under the curated section.
#include <string_view>

#include "report/console_style.hpp"
#include "report/json_fields.hpp"

namespace genscope::detail {
namespace {

using Renderer = void (*)(std::string&, const Attachment&, const ConsoleStyle&, const std::string&);

struct KnownType {
  std::string_view type;
  Renderer render;
};

// Every attachment type produced in this code base (src/, integrations/, python/).
constexpr KnownType kKnown[] = {
    {"tensor", render_tensor_attachment},
    {"latent", render_latent_attachment},
    {"tensor_comparison", render_comparison_attachment},
    {"text", render_text_attachment},
    {"outputs", render_outputs_attachment},
    {"model_component", render_component_attachment},
    {"model_state", render_model_state_attachment},
    {"model_snapshot", render_snapshot_attachment},
    {"lora_application", render_lora_attachment},
    {"usage", render_usage_attachment},
    {"usage_statistics", render_usage_statistics_attachment},
    {"performance", render_performance_attachment},
};

}  // namespace

void render_attachment(std::string& out, const Attachment& a, const ConsoleStyle& s,
                       const std::string& indent) {
  if (a.data.is_object()) {
    for (const KnownType& k : kKnown) {
      if (k.type != a.type) continue;
      k.render(out, a, s, indent);
      if (s.verbose) {
        out += indent + "   data:\n";
        render_json_tree(out, a.data, indent + "     ", true, s.plain);
      }
      return;
    }
  }
  out += indent + s.mark("📎 ", "* ") + a.type + (a.name.empty() ? "" : " \"" + a.name + "\"") +
         "\n";
  render_json_tree(out, a.data, indent + "   ", s.verbose, s.plain);
}

}  // namespace genscope::detail
