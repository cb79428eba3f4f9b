// ModelSnapshot from safetensors files, and its JSON form.
#define XXH_INLINE_ALL
#include <xxhash.h>

#include <cstdio>

#include "genscope/error.hpp"
#include "genscope/model_snapshot.hpp"
#include "genscope/safetensors.hpp"

namespace genscope {

std::uint64_t ModelSnapshot::total_bytes() const noexcept {
  std::uint64_t n = 0;
  for (const auto& [k, p] : parameters) n += p.bytes;
  return n;
}

std::uint64_t ModelSnapshot::total_elements() const noexcept {
  std::uint64_t n = 0;
  for (const auto& [k, p] : parameters) {
    std::uint64_t e = 1;
    for (std::int64_t d : p.shape) e *= static_cast<std::uint64_t>(d);
    n += e;
  }
  return n;
}

ModelSnapshot snapshot_from_safetensors(const std::filesystem::path& path, bool hash) {
  const SafetensorsFile file = SafetensorsFile::open(path);
  ModelSnapshot s;
  s.id = std::filesystem::absolute(path).string();
  s.class_name = "SafetensorsFile";
  s.device = "cpu";
  for (const SafetensorsEntry& e : file.entries()) {
    ParameterInfo p{e.shape, e.dtype, "cpu", e.nbytes(), std::nullopt};
    if (hash) {
      const auto bytes = file.bytes(e);
      p.content_hash = XXH3_64bits(bytes.data(), bytes.size());
    }
    s.parameters.emplace(e.name, std::move(p));
  }
  return s;
}

void to_json(nlohmann::json& j, const ModelSnapshot& s) {
  nlohmann::json params = nlohmann::json::object();
  for (const auto& [key, p] : s.parameters) {
    nlohmann::json pj{{"shape", p.shape}, {"dtype", dtype_name(p.dtype)}, {"device", p.device}, {"bytes", p.bytes}};
    if (p.content_hash) {
      char buf[17];
      std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(*p.content_hash));
      pj["xxh3"] = buf;
    }
    params[key] = std::move(pj);
  }
  j = nlohmann::json{{"model_id", s.id},
                     {"class", s.class_name},
                     {"device", s.device},
                     {"load_device", s.load_device},
                     {"offload_device", s.offload_device},
                     {"patches_count", s.patches_count},
                     {"patches_uuid", s.patches_uuid},
                     {"parameter_count", s.parameters.size()},
                     {"total_bytes", s.total_bytes()},
                     {"total_elements", s.total_elements()},
                     {"parameters", std::move(params)}};
}

void from_json(const nlohmann::json& j, ModelSnapshot& s) {
  try {
    s = ModelSnapshot{};
    s.id = j.at("model_id").get<std::string>();
    s.class_name = j.at("class").get<std::string>();
    s.device = j.value("device", "");
    s.load_device = j.value("load_device", "");
    s.offload_device = j.value("offload_device", "");
    s.patches_count = j.value("patches_count", std::int64_t{0});
    s.patches_uuid = j.value("patches_uuid", "");
    for (const auto& [key, pj] : j.at("parameters").items()) {
      ParameterInfo p;
      p.shape = pj.at("shape").get<std::vector<std::int64_t>>();
      const auto dtype = parse_dtype(pj.at("dtype").get<std::string>());
      if (!dtype) throw Error("InvalidSnapshotJson", "parameter '" + key + "' has an unknown dtype");
      p.dtype = *dtype;
      p.device = pj.value("device", "cpu");
      p.bytes = pj.at("bytes").get<std::uint64_t>();
      if (pj.contains("xxh3")) p.content_hash = std::stoull(pj.at("xxh3").get<std::string>(), nullptr, 16);
      s.parameters.emplace(key, std::move(p));
    }
  } catch (const nlohmann::json::exception& e) {
    throw Error("InvalidSnapshotJson", std::string("model snapshot JSON: ") + e.what());
  } catch (const std::invalid_argument&) {
    throw Error("InvalidSnapshotJson", "model snapshot JSON: bad xxh3 value");
  }
}

}  // namespace genscope
