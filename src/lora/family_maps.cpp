// Family name maps (see family_maps.hpp for the upstream sources and revisions).
#include "lora/family_maps.hpp"

#include <array>
#include <string_view>
#include <utility>

namespace genscope::detail {
namespace {

using Names = std::pair<std::string_view, std::string_view>;

constexpr std::array<std::string_view, 6> kUnetMapAttentions{
    "proj_in.weight", "proj_in.bias", "proj_out.weight", "proj_out.bias", "norm.weight", "norm.bias"};
constexpr std::array<std::string_view, 20> kTransformerBlocks{
    "norm1.weight",         "norm1.bias",           "norm2.weight",          "norm2.bias",
    "norm3.weight",         "norm3.bias",           "attn1.to_q.weight",     "attn1.to_k.weight",
    "attn1.to_v.weight",    "attn1.to_out.0.weight", "attn1.to_out.0.bias",  "attn2.to_q.weight",
    "attn2.to_k.weight",    "attn2.to_v.weight",    "attn2.to_out.0.weight", "attn2.to_out.0.bias",
    "ff.net.0.proj.weight", "ff.net.0.proj.bias",   "ff.net.2.weight",       "ff.net.2.bias"};
// ldm resnet name, diffusers resnet name (UNET_MAP_RESNET, a dict: this order).
constexpr std::array<Names, 12> kUnetMapResnet{{
    {"in_layers.2.weight", "conv1.weight"},
    {"in_layers.2.bias", "conv1.bias"},
    {"emb_layers.1.weight", "time_emb_proj.weight"},
    {"emb_layers.1.bias", "time_emb_proj.bias"},
    {"out_layers.3.weight", "conv2.weight"},
    {"out_layers.3.bias", "conv2.bias"},
    {"skip_connection.weight", "conv_shortcut.weight"},
    {"skip_connection.bias", "conv_shortcut.bias"},
    {"in_layers.0.weight", "norm1.weight"},
    {"in_layers.0.bias", "norm1.bias"},
    {"out_layers.0.weight", "norm2.weight"},
    {"out_layers.0.bias", "norm2.bias"},
}};
// ldm name, diffusers name of the weights outside the levels (UNET_MAP_BASIC).
constexpr std::array<Names, 18> kUnetMapBasic{{
    {"label_emb.0.0.weight", "class_embedding.linear_1.weight"},
    {"label_emb.0.0.bias", "class_embedding.linear_1.bias"},
    {"label_emb.0.2.weight", "class_embedding.linear_2.weight"},
    {"label_emb.0.2.bias", "class_embedding.linear_2.bias"},
    {"label_emb.0.0.weight", "add_embedding.linear_1.weight"},
    {"label_emb.0.0.bias", "add_embedding.linear_1.bias"},
    {"label_emb.0.2.weight", "add_embedding.linear_2.weight"},
    {"label_emb.0.2.bias", "add_embedding.linear_2.bias"},
    {"input_blocks.0.0.weight", "conv_in.weight"},
    {"input_blocks.0.0.bias", "conv_in.bias"},
    {"out.0.weight", "conv_norm_out.weight"},
    {"out.0.bias", "conv_norm_out.bias"},
    {"out.2.weight", "conv_out.weight"},
    {"out.2.bias", "conv_out.bias"},
    {"time_embed.0.weight", "time_embedding.linear_1.weight"},
    {"time_embed.0.bias", "time_embedding.linear_1.bias"},
    {"time_embed.2.weight", "time_embedding.linear_2.weight"},
    {"time_embed.2.bias", "time_embedding.linear_2.bias"},
}};

// MMDIT_MAP_BASIC (original, diffusers); the last two are swap_scale_shift entries.
constexpr std::array<Names, 17> kMmditBasic{{
    {"context_embedder.bias", "context_embedder.bias"},
    {"context_embedder.weight", "context_embedder.weight"},
    {"t_embedder.mlp.0.bias", "time_text_embed.timestep_embedder.linear_1.bias"},
    {"t_embedder.mlp.0.weight", "time_text_embed.timestep_embedder.linear_1.weight"},
    {"t_embedder.mlp.2.bias", "time_text_embed.timestep_embedder.linear_2.bias"},
    {"t_embedder.mlp.2.weight", "time_text_embed.timestep_embedder.linear_2.weight"},
    {"x_embedder.proj.bias", "pos_embed.proj.bias"},
    {"x_embedder.proj.weight", "pos_embed.proj.weight"},
    {"y_embedder.mlp.0.bias", "time_text_embed.text_embedder.linear_1.bias"},
    {"y_embedder.mlp.0.weight", "time_text_embed.text_embedder.linear_1.weight"},
    {"y_embedder.mlp.2.bias", "time_text_embed.text_embedder.linear_2.bias"},
    {"y_embedder.mlp.2.weight", "time_text_embed.text_embedder.linear_2.weight"},
    {"pos_embed", "pos_embed.pos_embed"},
    {"final_layer.linear.bias", "proj_out.bias"},
    {"final_layer.linear.weight", "proj_out.weight"},
    {"final_layer.adaLN_modulation.1.bias", "norm_out.linear.bias"},
    {"final_layer.adaLN_modulation.1.weight", "norm_out.linear.weight"},
}};
// MMDIT_MAP_BLOCK (original, diffusers) inside joint_blocks.N / transformer_blocks.N.
constexpr std::array<Names, 24> kMmditBlock{{
    {"context_block.adaLN_modulation.1.bias", "norm1_context.linear.bias"},
    {"context_block.adaLN_modulation.1.weight", "norm1_context.linear.weight"},
    {"context_block.attn.proj.bias", "attn.to_add_out.bias"},
    {"context_block.attn.proj.weight", "attn.to_add_out.weight"},
    {"context_block.mlp.fc1.bias", "ff_context.net.0.proj.bias"},
    {"context_block.mlp.fc1.weight", "ff_context.net.0.proj.weight"},
    {"context_block.mlp.fc2.bias", "ff_context.net.2.bias"},
    {"context_block.mlp.fc2.weight", "ff_context.net.2.weight"},
    {"context_block.attn.ln_q.weight", "attn.norm_added_q.weight"},
    {"context_block.attn.ln_k.weight", "attn.norm_added_k.weight"},
    {"x_block.adaLN_modulation.1.bias", "norm1.linear.bias"},
    {"x_block.adaLN_modulation.1.weight", "norm1.linear.weight"},
    {"x_block.attn.proj.bias", "attn.to_out.0.bias"},
    {"x_block.attn.proj.weight", "attn.to_out.0.weight"},
    {"x_block.attn.ln_q.weight", "attn.norm_q.weight"},
    {"x_block.attn.ln_k.weight", "attn.norm_k.weight"},
    {"x_block.attn2.proj.bias", "attn2.to_out.0.bias"},
    {"x_block.attn2.proj.weight", "attn2.to_out.0.weight"},
    {"x_block.attn2.ln_q.weight", "attn2.norm_q.weight"},
    {"x_block.attn2.ln_k.weight", "attn2.norm_k.weight"},
    {"x_block.mlp.fc1.bias", "ff.net.0.proj.bias"},
    {"x_block.mlp.fc1.weight", "ff.net.0.proj.weight"},
    {"x_block.mlp.fc2.bias", "ff.net.2.bias"},
    {"x_block.mlp.fc2.weight", "ff.net.2.weight"},
}};

// flux_to_diffusers block_map of a double block (diffusers, original).
constexpr std::array<Names, 28> kFluxDouble{{
    {"attn.to_out.0.weight", "img_attn.proj.weight"},
    {"attn.to_out.0.bias", "img_attn.proj.bias"},
    {"norm1.linear.weight", "img_mod.lin.weight"},
    {"norm1.linear.bias", "img_mod.lin.bias"},
    {"norm1_context.linear.weight", "txt_mod.lin.weight"},
    {"norm1_context.linear.bias", "txt_mod.lin.bias"},
    {"attn.to_add_out.weight", "txt_attn.proj.weight"},
    {"attn.to_add_out.bias", "txt_attn.proj.bias"},
    {"ff.net.0.proj.weight", "img_mlp.0.weight"},
    {"ff.net.0.proj.bias", "img_mlp.0.bias"},
    {"ff.net.2.weight", "img_mlp.2.weight"},
    {"ff.net.2.bias", "img_mlp.2.bias"},
    {"ff_context.net.0.proj.weight", "txt_mlp.0.weight"},
    {"ff_context.net.0.proj.bias", "txt_mlp.0.bias"},
    {"ff_context.net.2.weight", "txt_mlp.2.weight"},
    {"ff_context.net.2.bias", "txt_mlp.2.bias"},
    {"ff.linear_in.weight", "img_mlp.0.weight"},
    {"ff.linear_in.bias", "img_mlp.0.bias"},
    {"ff.linear_out.weight", "img_mlp.2.weight"},
    {"ff.linear_out.bias", "img_mlp.2.bias"},
    {"ff_context.linear_in.weight", "txt_mlp.0.weight"},
    {"ff_context.linear_in.bias", "txt_mlp.0.bias"},
    {"ff_context.linear_out.weight", "txt_mlp.2.weight"},
    {"ff_context.linear_out.bias", "txt_mlp.2.bias"},
    {"attn.norm_q.weight", "img_attn.norm.query_norm.weight"},
    {"attn.norm_k.weight", "img_attn.norm.key_norm.weight"},
    {"attn.norm_added_q.weight", "txt_attn.norm.query_norm.weight"},
    {"attn.norm_added_k.weight", "txt_attn.norm.key_norm.weight"},
}};
constexpr std::array<Names, 8> kFluxSingle{{
    {"norm.linear.weight", "modulation.lin.weight"},
    {"norm.linear.bias", "modulation.lin.bias"},
    {"proj_out.weight", "linear2.weight"},
    {"proj_out.bias", "linear2.bias"},
    {"attn.norm_q.weight", "norm.query_norm.weight"},
    {"attn.norm_k.weight", "norm.key_norm.weight"},
    {"attn.to_qkv_mlp_proj.weight", "linear1.weight"},
    {"attn.to_out.weight", "linear2.weight"},
}};
// MAP_BASIC of flux_to_diffusers (original, diffusers); the last two swap_scale_shift.
constexpr std::array<Names, 22> kFluxBasic{{
    {"final_layer.linear.bias", "proj_out.bias"},
    {"final_layer.linear.weight", "proj_out.weight"},
    {"img_in.bias", "x_embedder.bias"},
    {"img_in.weight", "x_embedder.weight"},
    {"time_in.in_layer.bias", "time_text_embed.timestep_embedder.linear_1.bias"},
    {"time_in.in_layer.weight", "time_text_embed.timestep_embedder.linear_1.weight"},
    {"time_in.out_layer.bias", "time_text_embed.timestep_embedder.linear_2.bias"},
    {"time_in.out_layer.weight", "time_text_embed.timestep_embedder.linear_2.weight"},
    {"txt_in.bias", "context_embedder.bias"},
    {"txt_in.weight", "context_embedder.weight"},
    {"vector_in.in_layer.bias", "time_text_embed.text_embedder.linear_1.bias"},
    {"vector_in.in_layer.weight", "time_text_embed.text_embedder.linear_1.weight"},
    {"vector_in.out_layer.bias", "time_text_embed.text_embedder.linear_2.bias"},
    {"vector_in.out_layer.weight", "time_text_embed.text_embedder.linear_2.weight"},
    {"guidance_in.in_layer.bias", "time_text_embed.guidance_embedder.linear_1.bias"},
    {"guidance_in.in_layer.weight", "time_text_embed.guidance_embedder.linear_1.weight"},
    {"guidance_in.out_layer.bias", "time_text_embed.guidance_embedder.linear_2.bias"},
    {"guidance_in.out_layer.weight", "time_text_embed.guidance_embedder.linear_2.weight"},
    {"pos_embed_input.bias", "controlnet_x_embedder.bias"},
    {"pos_embed_input.weight", "controlnet_x_embedder.weight"},
    {"final_layer.adaLN_modulation.1.bias", "norm_out.linear.bias"},
    {"final_layer.adaLN_modulation.1.weight", "norm_out.linear.weight"},
}};

// Wan: original block-relative name, diffusers name (weights and biases).
constexpr std::array<Names, 30> kWanBlock{{
    {"self_attn.q.weight", "attn1.to_q.weight"},      {"self_attn.q.bias", "attn1.to_q.bias"},
    {"self_attn.k.weight", "attn1.to_k.weight"},      {"self_attn.k.bias", "attn1.to_k.bias"},
    {"self_attn.v.weight", "attn1.to_v.weight"},      {"self_attn.v.bias", "attn1.to_v.bias"},
    {"self_attn.o.weight", "attn1.to_out.0.weight"},  {"self_attn.o.bias", "attn1.to_out.0.bias"},
    {"self_attn.norm_q.weight", "attn1.norm_q.weight"}, {"self_attn.norm_k.weight", "attn1.norm_k.weight"},
    {"cross_attn.q.weight", "attn2.to_q.weight"},     {"cross_attn.q.bias", "attn2.to_q.bias"},
    {"cross_attn.k.weight", "attn2.to_k.weight"},     {"cross_attn.k.bias", "attn2.to_k.bias"},
    {"cross_attn.v.weight", "attn2.to_v.weight"},     {"cross_attn.v.bias", "attn2.to_v.bias"},
    {"cross_attn.o.weight", "attn2.to_out.0.weight"}, {"cross_attn.o.bias", "attn2.to_out.0.bias"},
    {"cross_attn.norm_q.weight", "attn2.norm_q.weight"}, {"cross_attn.norm_k.weight", "attn2.norm_k.weight"},
    {"cross_attn.k_img.weight", "attn2.add_k_proj.weight"}, {"cross_attn.k_img.bias", "attn2.add_k_proj.bias"},
    {"cross_attn.v_img.weight", "attn2.add_v_proj.weight"}, {"cross_attn.v_img.bias", "attn2.add_v_proj.bias"},
    {"cross_attn.norm_k_img.weight", "attn2.norm_added_k.weight"},
    {"norm3.weight", "norm2.weight"},                  {"norm3.bias", "norm2.bias"},
    {"ffn.0.weight", "ffn.net.0.proj.weight"},         {"ffn.0.bias", "ffn.net.0.proj.bias"},
    {"modulation", "scale_shift_table"},
}};
constexpr std::array<Names, 21> kWanGlobal{{
    {"patch_embedding.weight", "patch_embedding.weight"},
    {"patch_embedding.bias", "patch_embedding.bias"},
    {"text_embedding.0.weight", "condition_embedder.text_embedder.linear_1.weight"},
    {"text_embedding.0.bias", "condition_embedder.text_embedder.linear_1.bias"},
    {"text_embedding.2.weight", "condition_embedder.text_embedder.linear_2.weight"},
    {"text_embedding.2.bias", "condition_embedder.text_embedder.linear_2.bias"},
    {"time_embedding.0.weight", "condition_embedder.time_embedder.linear_1.weight"},
    {"time_embedding.0.bias", "condition_embedder.time_embedder.linear_1.bias"},
    {"time_embedding.2.weight", "condition_embedder.time_embedder.linear_2.weight"},
    {"time_embedding.2.bias", "condition_embedder.time_embedder.linear_2.bias"},
    {"time_projection.1.weight", "condition_embedder.time_proj.weight"},
    {"time_projection.1.bias", "condition_embedder.time_proj.bias"},
    {"head.head.weight", "proj_out.weight"},
    {"head.head.bias", "proj_out.bias"},
    {"head.modulation", "scale_shift_table"},
    {"img_emb.proj.0.weight", "condition_embedder.image_embedder.norm1.weight"},
    {"img_emb.proj.0.bias", "condition_embedder.image_embedder.norm1.bias"},
    {"img_emb.proj.1.weight", "condition_embedder.image_embedder.ff.net.0.proj.weight"},
    {"img_emb.proj.1.bias", "condition_embedder.image_embedder.ff.net.0.proj.bias"},
    {"img_emb.proj.3.weight", "condition_embedder.image_embedder.ff.net.2.weight"},
    {"img_emb.proj.4.weight", "condition_embedder.image_embedder.norm2.weight"},
}};

std::string str(std::string_view s) { return std::string(s); }
std::string num(int i) { return std::to_string(i); }

}  // namespace

std::vector<FamilyPair> unet_pairs(const UnetConfig& config) {
  std::vector<FamilyPair> out;
  const auto add = [&out](std::string d, std::string l) { out.push_back({std::move(d), std::move(l)}); };
  const int levels = static_cast<int>(config.num_res_blocks.size());
  std::size_t depth_i = 0;
  const auto transformer = [&](const std::string& d, const std::string& l, int depth) {
    for (std::string_view b : kUnetMapAttentions) add(d + str(b), l + str(b));
    for (int t = 0; t < depth; ++t) {
      for (std::string_view b : kTransformerBlocks) {
        add(d + "transformer_blocks." + num(t) + "." + str(b), l + "transformer_blocks." + num(t) + "." + str(b));
      }
    }
  };
  for (int x = 0; x < levels; ++x) {
    int n = 1 + (config.num_res_blocks[x] + 1) * x;
    for (int i = 0; i < config.num_res_blocks[x]; ++i) {
      for (const auto& [l, d] : kUnetMapResnet) {
        add("down_blocks." + num(x) + ".resnets." + num(i) + "." + str(d), "input_blocks." + num(n) + ".0." + str(l));
      }
      const int depth = depth_i < config.transformer_depth.size() ? config.transformer_depth[depth_i++] : 0;
      if (depth > 0) transformer("down_blocks." + num(x) + ".attentions." + num(i) + ".", "input_blocks." + num(n) + ".1.", depth);
      ++n;
    }
    for (std::string_view k : {"weight", "bias"}) {
      add("down_blocks." + num(x) + ".downsamplers.0.conv." + str(k), "input_blocks." + num(n) + ".0.op." + str(k));
    }
  }
  // ComfyUI maps the middle block's attention whatever its depth, then its transformers.
  for (std::string_view b : kUnetMapAttentions) add("mid_block.attentions.0." + str(b), "middle_block.1." + str(b));
  for (int t = 0; t < config.transformer_depth_middle; ++t) {
    for (std::string_view b : kTransformerBlocks) {
      add("mid_block.attentions.0.transformer_blocks." + num(t) + "." + str(b),
          "middle_block.1.transformer_blocks." + num(t) + "." + str(b));
    }
  }
  for (int i = 0; i < 2; ++i) {
    for (const auto& [l, d] : kUnetMapResnet) {
      add("mid_block.resnets." + num(i) + "." + str(d), "middle_block." + num(i * 2) + "." + str(l));
    }
  }
  std::size_t out_i = 0;
  for (int x = 0; x < levels; ++x) {
    const int res = config.num_res_blocks[levels - 1 - x];
    int n = (res + 1) * x;
    const int l = res + 1;
    for (int i = 0; i < l; ++i) {
      int c = 0;
      for (const auto& [lk, d] : kUnetMapResnet) {
        add("up_blocks." + num(x) + ".resnets." + num(i) + "." + str(d), "output_blocks." + num(n) + ".0." + str(lk));
      }
      ++c;
      const int depth = out_i < config.transformer_depth_output.size() ? config.transformer_depth_output[out_i++] : 0;
      if (depth > 0) {
        ++c;
        transformer("up_blocks." + num(x) + ".attentions." + num(i) + ".", "output_blocks." + num(n) + ".1.", depth);
      }
      if (i == l - 1) {
        for (std::string_view k : {"weight", "bias"}) {
          add("up_blocks." + num(x) + ".upsamplers.0.conv." + str(k),
              "output_blocks." + num(n) + "." + num(c) + ".conv." + str(k));
        }
      }
      ++n;
    }
  }
  for (const auto& [l, d] : kUnetMapBasic) add(str(d), str(l));
  return out;
}

std::vector<FamilyPair> mmdit_pairs(int depth, int blocks) {
  std::vector<FamilyPair> out;
  const std::int64_t offset = static_cast<std::int64_t>(depth) * 64;
  for (int i = 0; i < blocks; ++i) {
    const std::string from = "transformer_blocks." + num(i) + ".";
    const std::string to = "joint_blocks." + num(i) + ".";
    for (std::string_view end : {"weight", "bias"}) {
      const auto qkv = [&](std::string_view attn, std::string_view block, std::array<std::string_view, 3> names) {
        for (int j = 0; j < 3; ++j) {
          out.push_back({from + str(attn) + "." + str(names[j]) + "." + str(end),
                         to + str(block) + ".qkv." + str(end), offset * j, offset});
        }
      };
      qkv("attn", "x_block.attn", {"to_q", "to_k", "to_v"});
      qkv("attn", "context_block.attn", {"add_q_proj", "add_k_proj", "add_v_proj"});
      qkv("attn2", "x_block.attn2", {"to_q", "to_k", "to_v"});
    }
    for (const auto& [o, d] : kMmditBlock) out.push_back({from + str(d), to + str(o)});
  }
  for (std::size_t k = 0; k < kMmditBasic.size(); ++k) {
    FamilyPair p{str(kMmditBasic[k].second), str(kMmditBasic[k].first)};
    p.swap_halves = k + 2 >= kMmditBasic.size();
    out.push_back(std::move(p));
  }
  for (std::string_view end : {"bias", "weight"}) {
    FamilyPair p{"transformer_blocks." + num(depth - 1) + ".norm1_context.linear." + str(end),
                 "joint_blocks." + num(depth - 1) + ".context_block.adaLN_modulation.1." + str(end)};
    p.swap_halves = true;
    out.push_back(std::move(p));
  }
  return out;
}

std::vector<FamilyPair> flux_pairs(int double_blocks, int single_blocks, std::int64_t hidden) {
  std::vector<FamilyPair> out;
  for (int i = 0; i < double_blocks; ++i) {
    const std::string from = "transformer_blocks." + num(i) + ".";
    const std::string to = "double_blocks." + num(i) + ".";
    for (std::string_view end : {"weight", "bias"}) {
      const std::array<std::string_view, 3> img{"to_q", "to_k", "to_v"}, txt{"add_q_proj", "add_k_proj", "add_v_proj"};
      for (int j = 0; j < 3; ++j) {
        out.push_back({from + "attn." + str(img[j]) + "." + str(end), to + "img_attn.qkv." + str(end), hidden * j, hidden});
      }
      for (int j = 0; j < 3; ++j) {
        out.push_back({from + "attn." + str(txt[j]) + "." + str(end), to + "txt_attn.qkv." + str(end), hidden * j, hidden});
      }
    }
    for (const auto& [d, o] : kFluxDouble) out.push_back({from + str(d), to + str(o)});
  }
  for (int i = 0; i < single_blocks; ++i) {
    const std::string from = "single_transformer_blocks." + num(i) + ".";
    const std::string to = "single_blocks." + num(i) + ".";
    for (std::string_view end : {"weight", "bias"}) {
      const std::array<std::string_view, 3> qkv{"to_q", "to_k", "to_v"};
      for (int j = 0; j < 3; ++j) {
        out.push_back({from + "attn." + str(qkv[j]) + "." + str(end), to + "linear1." + str(end), hidden * j, hidden});
      }
      out.push_back({from + "proj_mlp." + str(end), to + "linear1." + str(end), hidden * 3, hidden * 4});
    }
    for (const auto& [d, o] : kFluxSingle) out.push_back({from + str(d), to + str(o)});
  }
  for (std::size_t k = 0; k < kFluxBasic.size(); ++k) {
    FamilyPair p{str(kFluxBasic[k].second), str(kFluxBasic[k].first)};
    p.swap_halves = k + 2 >= kFluxBasic.size();
    out.push_back(std::move(p));
  }
  return out;
}

std::vector<FamilyPair> wan_pairs(int blocks) {
  std::vector<FamilyPair> out;
  for (int i = 0; i < blocks; ++i) {
    const std::string b = "blocks." + num(i) + ".";
    for (const auto& [o, d] : kWanBlock) out.push_back({b + str(d), b + str(o)});
    out.push_back({b + "ffn.net.2.weight", b + "ffn.2.weight"});
    out.push_back({b + "ffn.net.2.bias", b + "ffn.2.bias"});
  }
  for (const auto& [o, d] : kWanGlobal) out.push_back({str(d), str(o)});
  out.push_back({"condition_embedder.image_embedder.ff.net.2.bias", "img_emb.proj.3.bias"});
  out.push_back({"condition_embedder.image_embedder.norm2.bias", "img_emb.proj.4.bias"});
  return out;
}

}  // namespace genscope::detail
