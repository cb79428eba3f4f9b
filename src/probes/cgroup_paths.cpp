// Parsers of /proc/self/cgroup and /proc/self/mountinfo (formats in cgroup_paths.hpp; see
// proc(5) "/proc/pid/cgroup" and "/proc/pid/mountinfo").
#include "probes/cgroup_paths.hpp"

#include <vector>

namespace genscope::detail {
namespace {

// Splits `line` on `sep` (empty fields kept).
std::vector<std::string_view> split(std::string_view line, char sep) {
  std::vector<std::string_view> out;
  std::size_t start = 0;
  for (;;) {
    const std::size_t end = line.find(sep, start);
    out.push_back(line.substr(start, end == std::string_view::npos ? end : end - start));
    if (end == std::string_view::npos) return out;
    start = end + 1;
  }
}

bool list_contains(std::string_view list, std::string_view item) {
  for (std::string_view entry : split(list, ',')) {
    if (entry == item) return true;
  }
  return false;
}

// Undoes the octal escapes of mountinfo fields ("\040" space, "\011" tab, "\012", "\134").
std::optional<std::string> unescape(std::string_view field) {
  std::string out;
  for (std::size_t i = 0; i < field.size(); ++i) {
    if (field[i] != '\\') {
      out += field[i];
      continue;
    }
    if (field.size() - i < 4) return std::nullopt;  // "\ooo" needs four characters
    int value = 0;
    for (std::size_t k = 1; k <= 3; ++k) {
      const char c = field[i + k];
      if (c < '0' || c > '7') return std::nullopt;
      value = value * 8 + (c - '0');
    }
    if (value == 0 || value > 255) return std::nullopt;
    out += static_cast<char>(value);
    i += 3;
  }
  return out;
}

template <class F>
void for_each_line(std::string_view text, F&& fn) {
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    if (end > start && !fn(text.substr(start, end - start))) return;
    start = end + 1;
  }
}

}  // namespace

std::optional<std::string> parse_own_cgroup(std::string_view proc_self_cgroup, int version) {
  std::optional<std::string> found;
  for_each_line(proc_self_cgroup, [&](std::string_view line) {
    const std::size_t a = line.find(':');
    const std::size_t b = a == std::string_view::npos ? a : line.find(':', a + 1);
    if (b == std::string_view::npos) return true;
    const std::string_view id = line.substr(0, a);
    const std::string_view controllers = line.substr(a + 1, b - a - 1);
    const std::string_view path = line.substr(b + 1);
    if (path.empty() || path.front() != '/') return true;
    const bool match = version == 2 ? (id == "0" && controllers.empty())
                                    : list_contains(controllers, "memory");
    if (match) found = std::string(path);
    return !match;
  });
  return found;
}

std::optional<CgroupMount> parse_cgroup_mount(std::string_view mountinfo, int version) {
  std::optional<CgroupMount> found;
  for_each_line(mountinfo, [&](std::string_view line) {
    const std::vector<std::string_view> f = split(line, ' ');
    // id parent maj:min root mount-point options [optional...] - fstype source super
    std::size_t dash = 6;
    while (dash < f.size() && f[dash] != "-") ++dash;
    if (dash + 3 >= f.size()) return true;  // needs fstype, source and super options
    const std::string_view fstype = f[dash + 1];
    const std::string_view super = f[dash + 3];
    const bool match = version == 2 ? fstype == "cgroup2"
                                    : (fstype == "cgroup" && list_contains(super, "memory"));
    if (!match) return true;
    auto root = unescape(f[3]);
    auto point = unescape(f[4]);
    if (!root || !point || root->empty() || root->front() != '/' || point->empty()) return true;
    found = CgroupMount{std::move(*root), std::move(*point)};
    return false;
  });
  return found;
}

std::optional<std::string> cgroup_directory(const CgroupMount& mount, std::string_view path) {
  std::string_view root = mount.root;
  if (root.size() > 1 && root.back() == '/') root.remove_suffix(1);
  if (root != "/") {
    if (path.substr(0, root.size()) != root) return std::nullopt;
    if (path.size() > root.size() && path[root.size()] != '/') return std::nullopt;
    path.remove_prefix(root.size());
  }
  // Never climb out of the mount: a ".." component is refused (in the path, and in a mount
  // point, which the kernel never writes with one: malformed mountinfo).
  for (std::string_view part : split(path, '/')) {
    if (part == "..") return std::nullopt;
  }
  for (std::string_view part : split(mount.mount_point, '/')) {
    if (part == "..") return std::nullopt;
  }
  std::string out = mount.mount_point;
  if (!path.empty() && path != "/") {
    if (out.empty() || out.back() != '/') out += '/';
    out += path.front() == '/' ? path.substr(1) : path;
  }
  return out;
}

}  // namespace genscope::detail
