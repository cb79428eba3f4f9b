// The typed error every genscope user-facing failure derives from.
//
// Each error carries a stable name (e.g. "HeaderTooLarge", "InvalidOffset") that tests,
// scripts and the CLI can rely on, and a human message that names the offending tensor,
// key or byte offset.
#pragma once

#include <stdexcept>
#include <string>

namespace genscope {

/// A user error (bad file, bad argument) with a stable machine-readable name.
class Error : public std::runtime_error {
 public:
  /// `name` is the stable error name; `message` the human explanation.
  Error(std::string name, const std::string& message)
      : std::runtime_error(message), name_(std::move(name)) {}
  /// The stable error name, e.g. "InvalidOffset".
  const std::string& name() const noexcept { return name_; }

 private:
  std::string name_;
};

}  // namespace genscope
