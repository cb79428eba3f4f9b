// The distributed identity of a run, read from the environment torchrun and
// torch.multiprocessing launchers set (docs/distributed.md).
#include "genscope/distributed.hpp"

#include <charconv>
#include <cstdlib>
#include <string_view>

namespace genscope {
namespace {

// The variable's value as an int; nullopt when unset or empty. `bad` is set when the value is
// there but not an integer.
std::optional<int> int_variable(const EnvironmentLookup& lookup, const char* name, bool& bad) {
  const char* v = lookup(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  const std::string_view s(v);
  int out = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  if (ec != std::errc() || end != s.data() + s.size()) {
    bad = true;
    return std::nullopt;
  }
  return out;
}

std::string text_variable(const EnvironmentLookup& lookup, const char* name) {
  const char* v = lookup(name);
  return v == nullptr ? std::string() : std::string(v);
}

void set_problem(std::string* problem, std::string text) {
  if (problem != nullptr) *problem = std::move(text);
}

// The group id, by the first source that names one.
void read_group(const EnvironmentLookup& lookup, DistributedInfo& info) {
  if (std::string g = text_variable(lookup, kDistributedGroupVariable); !g.empty()) {
    info.group = std::move(g);
    info.group_source = "genscope";
    return;
  }
  // torchrun's default rendezvous id is "none" (static rendezvous): it names no launch.
  if (std::string id = text_variable(lookup, "TORCHELASTIC_RUN_ID"); !id.empty() && id != "none") {
    bool bad = false;
    const std::optional<int> restart = int_variable(lookup, "TORCHELASTIC_RESTART_COUNT", bad);
    if (restart && *restart > 0) id += ".restart" + std::to_string(*restart);
    info.group = std::move(id);
    info.group_source = "torchelastic";
    return;
  }
  const std::string addr = text_variable(lookup, "MASTER_ADDR");
  const std::string port = text_variable(lookup, "MASTER_PORT");
  if (!addr.empty() || !port.empty()) {
    info.group = addr + ":" + port;
    info.group_source = "master";
  }
}

}  // namespace

std::optional<DistributedInfo> distributed_from_environment(const EnvironmentLookup& lookup,
                                                            std::string* problem) {
  bool bad_rank = false, bad_world = false, bad_other = false;
  const std::optional<int> rank = int_variable(lookup, "RANK", bad_rank);
  const std::optional<int> world = int_variable(lookup, "WORLD_SIZE", bad_world);
  if (bad_rank) {
    set_problem(problem, "RANK='" + text_variable(lookup, "RANK") + "' is not an integer");
    return std::nullopt;
  }
  if (bad_world) {
    set_problem(problem, "WORLD_SIZE='" + text_variable(lookup, "WORLD_SIZE") + "' is not an integer");
    return std::nullopt;
  }
  DistributedInfo info;
  if (rank || world) {
    if (!rank || !world) {
      set_problem(problem, std::string(rank ? "RANK" : "WORLD_SIZE") + " is set without " +
                               (rank ? "WORLD_SIZE" : "RANK"));
      return std::nullopt;
    }
    if (*world < 1 || *rank < 0 || *rank >= *world) {
      set_problem(problem, "RANK=" + std::to_string(*rank) + " is not in [0, WORLD_SIZE=" +
                               std::to_string(*world) + ")");
      return std::nullopt;
    }
    info.rank = *rank;
    info.world_size = *world;
    info.local_rank = int_variable(lookup, "LOCAL_RANK", bad_other).value_or(-1);
    info.node_rank = int_variable(lookup, "GROUP_RANK", bad_other).value_or(-1);
    read_group(lookup, info);
    return info;
  }
  return std::nullopt;
}

std::optional<DistributedInfo> distributed_from_environment(std::string* problem) {
  return distributed_from_environment([](const char* name) { return std::getenv(name); }, problem);
}

std::string describe(const DistributedInfo& info) {
  std::string out;
  if (info.role == "launcher") {
    out = "launcher";
  } else {
    out = "rank " + std::to_string(info.rank);
    if (info.world_size > 0) out += " of " + std::to_string(info.world_size);
    std::string where;
    if (info.local_rank >= 0) where = "local " + std::to_string(info.local_rank);
    if (info.node_rank >= 0)
      where += (where.empty() ? "" : ", ") + std::string("node ") + std::to_string(info.node_rank);
    if (!where.empty()) out += " (" + where + ")";
  }
  if (!info.group.empty()) out += (info.role == "launcher" ? " of group " : ", group ") + info.group;
  return out;
}

}  // namespace genscope
