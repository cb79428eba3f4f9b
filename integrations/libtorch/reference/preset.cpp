// The preset table of the reference pipeline.
#include "preset.hpp"

#include <array>

#include "genscope/error.hpp"

namespace genscope::detail {
namespace {

std::array<Preset, 3> make_presets() {
  Preset tiny;
  tiny.name = "tiny";
  tiny.weight_seed = 0x7e57'0001;

  Preset small;
  small.name = "small";
  small.weight_seed = 0x7e57'0002;
  small.text_width = 768;  // SD1.x context width: the conditioning classifies as SD1.x.
  small.text_layers = 2;
  small.text_heads = 12;
  small.image_size = 128;
  small.unet_channels = 64;
  small.unet_mult = {1, 2, 2};
  small.unet_heads = 4;
  small.vae_channels = 32;
  small.video_size = 64;
  small.video_frames = 17;
  small.dit_width = 192;
  small.dit_layers = 4;
  small.dit_heads = 4;
  small.default_steps = 20;
  small.lora_rank = 8;
  small.lora_alpha = 8.0;

  Preset large;  // SD1.5-like shapes (hundreds of MB of weights).
  large.name = "large";
  large.weight_seed = 0x7e57'0003;
  large.text_width = 768;
  large.text_layers = 12;
  large.text_heads = 12;
  large.image_size = 512;
  large.unet_channels = 192;
  large.unet_mult = {1, 2, 4, 4};
  large.unet_heads = 8;
  large.vae_channels = 64;
  large.video_size = 256;
  large.video_frames = 33;
  large.dit_width = 768;
  large.dit_layers = 12;
  large.dit_heads = 12;
  large.default_steps = 30;
  large.lora_rank = 16;
  large.lora_alpha = 16.0;
  return {tiny, small, large};
}

const std::array<Preset, 3>& presets() {
  static const std::array<Preset, 3> table = make_presets();
  return table;
}

}  // namespace

const Preset& find_preset(std::string_view name) {
  for (const Preset& p : presets()) {
    if (p.name == name) return p;
  }
  throw Error("InvalidOption",
              "unknown preset '" + std::string(name) + "' (expected tiny, small or large)");
}

std::vector<std::string> preset_names() {
  std::vector<std::string> names;
  for (const Preset& p : presets()) names.push_back(p.name);
  return names;
}

}  // namespace genscope::detail
