// TensorSet: tensors of dump files and folders, and their comparison by name.
#include "genscope/tensor_set.hpp"

#include <algorithm>
#include <map>

#include "genscope/error.hpp"
#include "genscope/npy.hpp"
#include "genscope/safetensors.hpp"

namespace genscope {

struct TensorSet::Storage {
  std::vector<SafetensorsFile> safetensors;
  std::vector<NpyArray> npy;
};

TensorSet::TensorSet() : storage_(std::make_unique<Storage>()) {}
TensorSet::TensorSet(TensorSet&&) noexcept = default;
TensorSet& TensorSet::operator=(TensorSet&&) noexcept = default;
TensorSet::~TensorSet() = default;

namespace {

namespace fs = std::filesystem;

bool has_ext(const fs::path& p, const char* ext) { return p.extension() == ext; }

std::string strip_ext(const fs::path& relative) {
  fs::path p = relative;
  p.replace_extension();
  return p.generic_string();
}

}  // namespace

TensorSet TensorSet::open(const std::string& spec) {
  TensorSet set;
  fs::path path(spec);
  std::string only;
  if (!fs::exists(path)) {
    // "FILE:NAME" selects one tensor of a safetensors file.
    const auto colon = spec.rfind(':');
    if (colon != std::string::npos && fs::exists(spec.substr(0, colon))) {
      path = spec.substr(0, colon);
      only = spec.substr(colon + 1);
    } else {
      throw Error("NotFound", "no such file or folder: " + spec);
    }
  }
  const auto add_file = [&](const fs::path& file, const std::string& prefix) {
    if (has_ext(file, ".npy")) {
      set.storage_->npy.push_back(read_npy(file));
      set.items_.push_back({prefix.empty() ? file.stem().string() : prefix, file.string(),
                            set.storage_->npy.back().view()});
    } else if (has_ext(file, ".safetensors")) {
      set.storage_->safetensors.push_back(SafetensorsFile::open(file));
      const SafetensorsFile& st = set.storage_->safetensors.back();
      for (const SafetensorsEntry& e : st.entries()) {
        if (!only.empty() && e.name != only) continue;
        set.items_.push_back({prefix.empty() ? e.name : prefix + "/" + e.name, file.string(),
                              st.view(e)});
      }
    } else if (prefix.empty()) {
      throw Error("UnknownTensorFile",
                  file.string() + ": not a .npy or .safetensors file (by extension)");
    }
  };
  if (fs::is_directory(path)) {
    std::vector<fs::path> files;
    for (const auto& entry : fs::recursive_directory_iterator(path)) {
      if (entry.is_regular_file() &&
          (has_ext(entry.path(), ".npy") || has_ext(entry.path(), ".safetensors"))) {
        files.push_back(entry.path());
      }
    }
    std::sort(files.begin(), files.end());
    for (const fs::path& f : files) add_file(f, strip_ext(fs::relative(f, path)));
  } else {
    add_file(path, {});
  }
  if (!only.empty() && set.items_.empty()) {
    throw Error("TensorNotFound", "no tensor named '" + only + "' in " + path.string());
  }
  std::sort(set.items_.begin(), set.items_.end(),
            [](const Item& x, const Item& y) { return x.name < y.name; });
  return set;
}

const TensorSet::Item* TensorSet::find(const std::string& name) const noexcept {
  for (const Item& i : items_) {
    if (i.name == name) return &i;
  }
  return nullptr;
}

TensorSetComparison compare_tensor_sets(const TensorSet& a, const TensorSet& b,
                                        const CompareOptions& options) {
  TensorSetComparison out;
  const auto compare_pair = [&](const std::string& name, const TensorSet::Item& x,
                                const TensorSet::Item& y) {
    TensorSetRow row{name, true, true, compare_tensors(x.view, y.view, options)};
    ++out.matched;
    if (!row.result.allclose) ++out.differing;
    out.rows.push_back(std::move(row));
  };
  if (a.items().size() == 1 && b.items().size() == 1) {
    const auto& x = a.items()[0];
    const auto& y = b.items()[0];
    compare_pair(x.name == y.name ? x.name : x.name + " vs " + y.name, x, y);
    return out;
  }
  std::map<std::string, std::pair<const TensorSet::Item*, const TensorSet::Item*>> names;
  for (const auto& i : a.items()) names[i.name].first = &i;
  for (const auto& i : b.items()) names[i.name].second = &i;
  for (const auto& [name, pair] : names) {
    if (pair.first != nullptr && pair.second != nullptr) {
      compare_pair(name, *pair.first, *pair.second);
    } else {
      TensorSetRow row;
      row.name = name;
      row.in_a = pair.first != nullptr;
      row.in_b = pair.second != nullptr;
      (row.in_a ? out.only_a : out.only_b) += 1;
      out.rows.push_back(std::move(row));
    }
  }
  return out;
}

}  // namespace genscope
