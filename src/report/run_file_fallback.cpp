// write_run_file_or_fallback: a finished run's document is never lost to a full disk or a
// read-only folder. Order: the requested path, then $XDG_STATE_HOME/genscope/runs/<id>.json
// (the XDG base-directory spec's place for state that should survive a restart; default
// $HOME/.local/state), then $TMPDIR/genscope-run-<id>.json (default /tmp), then the caller's
// last-resort stream (the CLI's --json-fallback: stderr). Every file write is atomic, so a
// failed attempt leaves no partial document behind.
#include <cstdlib>
#include <ostream>
#include <system_error>

#include "core/utc_time.hpp"
#include "genscope/error.hpp"
#include "genscope/run_json.hpp"
#include "report/run_document_text.hpp"

namespace genscope {
namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? std::string() : std::string(v);
}

// The run id is 32 hex digits; anything else (a hand-made Run) is reduced to a safe name.
std::string file_stem(const Run& run) {
  std::string id;
  for (char c : run.id) {
    const bool safe = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                      c == '-' || c == '_';
    id += safe ? c : '_';
  }
  if (id.empty()) {
    id = "unnamed-" + std::to_string(detail::unix_now_ns());
  }
  return id;
}

bool try_write(const std::filesystem::path& path, const std::string& text, bool create_folder,
               std::vector<RunFileFailure>& failures) {
  try {
    if (create_folder) {
      std::error_code ec;
      std::filesystem::create_directories(path.parent_path(), ec);
      if (ec) {
        failures.push_back({path, "WriteFailed",
                            "cannot create the folder '" + path.parent_path().string() +
                                "': " + ec.message()});
        return false;
      }
    }
    write_file_atomic(path, text);
    return true;
  } catch (const Error& e) {
    failures.push_back({path, e.name(), e.what()});
  } catch (const std::exception& e) {
    failures.push_back({path, "WriteFailed", e.what()});
  }
  return false;
}

}  // namespace

std::vector<std::filesystem::path> run_file_fallback_dirs() {
  std::vector<std::filesystem::path> dirs;
  // XDG Base Directory Specification 0.8: a relative $XDG_STATE_HOME is invalid and ignored.
  std::filesystem::path state = env("XDG_STATE_HOME");
  if (state.empty() || state.is_relative()) {
    const std::string home = env("HOME");
    state = home.empty() ? std::filesystem::path() : std::filesystem::path(home) / ".local" / "state";
  }
  if (!state.empty()) dirs.push_back(state / "genscope" / "runs");
  const std::string tmp = env("TMPDIR");
  dirs.push_back(tmp.empty() ? std::filesystem::path("/tmp") : std::filesystem::path(tmp));
  return dirs;
}

RunFileOutcome write_run_file_or_fallback(const Run& run, const std::filesystem::path& path,
                                          std::ostream* last_resort) {
  RunFileOutcome out;
  out.requested = path;
  std::string text;
  try {
    text = detail::run_document_text(run);
  } catch (const std::exception& e) {  // std::bad_alloc: nothing else can go wrong here
    out.failures.push_back({path, "WriteFailed", std::string("cannot serialise the run: ") + e.what()});
    return out;
  }
  if (try_write(path, text, false, out.failures)) {
    out.path = path;
    return out;
  }
  const std::string stem = file_stem(run);
  const std::vector<std::filesystem::path> dirs = run_file_fallback_dirs();
  for (std::size_t i = 0; i < dirs.size(); ++i) {
    const bool state_folder = i + 1 < dirs.size();  // the last one is the temporary folder
    const std::filesystem::path file =
        dirs[i] / (state_folder ? stem + ".json" : "genscope-run-" + stem + ".json");
    if (try_write(file, text, state_folder, out.failures)) {
      out.path = file;
      return out;
    }
  }
  if (last_resort != nullptr) {
    *last_resort << text;
    last_resort->flush();
    if (*last_resort) {
      out.streamed = true;
    } else {
      out.failures.push_back({"-", "WriteFailed", "the last-resort stream refused the document"});
    }
  }
  return out;
}

}  // namespace genscope
