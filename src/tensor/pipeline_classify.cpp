// One family verdict from every tensor a pipeline's denoiser was seen with, and aliases
// resolved by the latents.
#include <algorithm>
#include <string>

#include "genscope/tensor_classify.hpp"
#include "tensor/family_table.hpp"

namespace genscope {
namespace {

std::string shape_text(std::span<const std::int64_t> shape) {
  std::string out;
  for (std::int64_t d : shape) {
    if (!out.empty()) out += 'x';
    out += std::to_string(d);
  }
  return out;
}

std::string names(const std::vector<FamilyCandidate>& c) {
  std::string out;
  for (const FamilyCandidate& f : c) {
    if (!out.empty()) out += ", ";
    out += family_name(f.family);
  }
  return out.empty() ? "none" : out;
}

bool has(const std::vector<FamilyCandidate>& c, ModelFamily f) {
  return std::any_of(c.begin(), c.end(), [&](const FamilyCandidate& x) { return x.family == f; });
}

}  // namespace

FamilyVerdict classify_pipeline(const PipelineTensors& t) {
  FamilyVerdict v;
  bool first = true;
  // Keeps the candidates of `kept` also in `seen` (the reasons joined); the first tensor
  // seeds the set.
  // `allowed`: the note's text for `seen` (its family names when empty).
  auto narrow = [&](const std::vector<FamilyCandidate>& seen, const std::string& what,
                    const std::string& allowed = "") {
    v.notes.push_back(what + ": " + (allowed.empty() ? names(seen) : allowed));
    if (first) {
      v.candidates = seen;
      first = false;
      return;
    }
    std::vector<FamilyCandidate> kept;
    for (FamilyCandidate c : v.candidates) {
      auto it = std::find_if(seen.begin(), seen.end(),
                             [&](const FamilyCandidate& s) { return s.family == c.family; });
      if (it == seen.end()) continue;
      c.reason += "; " + it->reason;
      kept.push_back(std::move(c));
    }
    if (kept.empty() && !v.candidates.empty()) {
      v.notes.push_back("conflict: " + what + " fits none of " + names(v.candidates));
    }
    v.candidates = std::move(kept);
  };
  if (t.context.size() == 3) {
    ConditioningClassification c = classify_conditioning(
        t.context, t.pooled.empty() ? std::nullopt : std::optional(t.pooled));
    if (has(c.candidates, ModelFamily::kWan21)) {  // TI2V-5B: Wan's umT5 encoder too
      c.candidates.push_back({ModelFamily::kWan22TI2V, "context " + shape_text(t.context) +
                                                           " (umT5-XXL, as Wan 2.x)"});
    }
    if (t.pooled.empty()) {
      // No pooled vector reached the denoiser: the families that need one are out.
      std::erase_if(c.candidates, [](const FamilyCandidate& f) {
        return detail::family_info(f.family).pooled_width != 0;
      });
    }
    narrow(c.candidates, "context " + shape_text(t.context) +
                             (t.pooled.empty() ? ", no pooled" : " + pooled " + shape_text(t.pooled)));
  }
  if (!t.latent.empty()) {
    const LatentClassification l = classify_latent(t.latent, t.source);
    narrow(l.candidates, "latents " + shape_text(t.latent));
  }
  if (t.audio_context && (!first || !t.audio_context->empty())) {
    // An audio stream's context: the families with that audio width; none received: the
    // families without an audio stream.
    const std::int64_t width = t.audio_context->empty() ? 0 : t.audio_context->back();
    std::vector<FamilyCandidate> seen;
    std::string with_audio;  // the families with an audio stream, out when there is none
    for (const detail::FamilyInfo& f : detail::family_table()) {
      if (f.audio_width != 0 && width == 0) {
        with_audio += (with_audio.empty() ? "" : ", ") + std::string(f.name);
      }
      if (f.audio_width != width) continue;
      seen.push_back({f.family, width == 0 ? "no audio context"
                                           : "audio context " + shape_text(*t.audio_context)});
    }
    if (width == 0) {
      narrow(seen, "no audio context", "the families without an audio stream (not " +
                                           with_audio + ")");
    } else {
      narrow(seen, "audio context " + shape_text(*t.audio_context));
    }
  }
  if (first) v.notes.push_back("no tensor seen");
  return v;
}

std::optional<ModelFamily> resolve_family(std::string_view name, const PipelineTensors& tensors) {
  const std::vector<ModelFamily> all = families_named(name);
  if (all.empty()) return std::nullopt;
  if (all.size() > 1) {
    const FamilyVerdict v = classify_pipeline(tensors);
    for (ModelFamily f : all) {
      if (has(v.candidates, f)) return f;
    }
  }
  return all.front();
}

}  // namespace genscope
