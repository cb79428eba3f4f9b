// The built-in recognisers by name (WatchOptions::recognizers).
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "watch/a1111_recognizer.hpp"
#include "watch/comfyui_recognizer.hpp"
#include "watch/recognizer.hpp"
#include "watch/sdcpp_recognizer.hpp"
#include "watch/tqdm_recognizer.hpp"

namespace genscope::watch {

std::vector<std::string> builtin_recognizer_names() { return {"comfyui", "sdcpp", "a1111", "tqdm"}; }

std::vector<std::unique_ptr<Recognizer>> make_builtin_recognizers(const std::vector<std::string>& names) {
  auto wanted = [&](std::string_view n) { return std::find(names.begin(), names.end(), n) != names.end(); };
  std::vector<std::unique_ptr<Recognizer>> out;
  if (wanted("comfyui")) out.push_back(std::make_unique<ComfyUIRecognizer>());
  if (wanted("sdcpp")) out.push_back(std::make_unique<SdcppRecognizer>());
  if (wanted("a1111")) out.push_back(std::make_unique<A1111Recognizer>());
  if (wanted("tqdm")) {
    // A1111's "Total progress" bar repeats the per-image bars: its recogniser reads it.
    std::vector<std::string> claimed;
    if (wanted("a1111")) claimed.push_back("Total progress");
    out.push_back(std::make_unique<TqdmRecognizer>(std::move(claimed)));
  }
  return out;
}

}  // namespace genscope::watch
