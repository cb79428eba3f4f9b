// genscope version, fixed at configure time from the project() version.
#pragma once

namespace genscope {

/// The library version as "MAJOR.MINOR.PATCH".
const char* version() noexcept;

}  // namespace genscope
