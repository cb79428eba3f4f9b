// Terminal escape sequences removed from a line before it is matched (colours, `\033[K`,
// cursor moves of nested progress bars). The bytes passed through to the terminal are not
// touched; only the copy that the recognisers read.
#pragma once

#include <string>
#include <string_view>

namespace genscope::watch {

/// `line` without ANSI/VT escape sequences (CSI `ESC [ ... final`, OSC `ESC ] ... BEL|ESC \`,
/// two-byte `ESC x`). Returns `line` itself when it holds no ESC; otherwise the result is
/// built in `scratch`.
std::string_view strip_ansi(std::string_view line, std::string& scratch);

}  // namespace genscope::watch
