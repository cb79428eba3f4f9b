// `genscope comfyui install|uninstall COMFYUI_DIR [--copy] [--source DIR]`: puts the genscope
// node package (integrations/comfyui, docs/comfyui.md) into ComfyUI's custom_nodes folder as
// custom_nodes/genscope_comfyui, a symbolic link (default) or a copy; idempotent.
// `genscope comfyui selftest COMFYUI_DIR [--python PY] ...`: runs the package's selftest driver
// (selftest.py, with ComfyUI's Python) against that ComfyUI; its exit code is the command's.
//
// The folder is not called "genscope": ComfyUI imports a custom node package under its folder
// name (sys.modules[name]), which would hide the genscope Python module the package uses.
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <system_error>
#include <vector>

#include "command.hpp"
#include "genscope/error.hpp"
#include "genscope/version.hpp"

namespace genscope::cli {
namespace {

namespace fs = std::filesystem;

constexpr const char* kFolder = "genscope_comfyui";
constexpr const char* kMarker = ".genscope-comfyui-copy";  // in copies: what to remove

bool is_package(const fs::path& dir) {
  std::error_code ec;
  return fs::is_regular_file(dir / "__init__.py", ec) && fs::is_regular_file(dir / "recorder.py", ec);
}

fs::path executable_dir() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::path() : exe.parent_path();
}

// Where the package is: --source, $GENSCOPE_COMFYUI_PACKAGE, the installed copy
// (<prefix>/share/genscope/comfyui beside <prefix>/bin/genscope, or under the configured
// prefix), the checkout this binary was built from.
fs::path find_package(const std::string& source) {
  std::vector<fs::path> tried;
  if (!source.empty()) {
    if (is_package(source)) return fs::absolute(source);
    throw Error("PackageNotFound", "--source " + source +
                                       " is not the genscope ComfyUI package (no __init__.py and "
                                       "recorder.py there)");
  }
  if (const char* env = std::getenv("GENSCOPE_COMFYUI_PACKAGE"); env != nullptr && *env != 0) {
    tried.emplace_back(env);
  }
  const fs::path bin = executable_dir();
  if (!bin.empty()) tried.push_back(bin.parent_path() / GENSCOPE_COMFYUI_DATADIR / "genscope" / "comfyui");
  tried.emplace_back(GENSCOPE_COMFYUI_INSTALLED_DIR);
  tried.emplace_back(GENSCOPE_COMFYUI_SOURCE_DIR);
  std::string list;
  for (const auto& dir : tried) {
    if (is_package(dir)) return fs::weakly_canonical(dir);
    list += (list.empty() ? "" : ", ") + dir.string();
  }
  throw Error("PackageNotFound",
              "the genscope ComfyUI package is not in any of: " + list +
                  " (install genscope with `cmake --install`, or give --source "
                  "CHECKOUT/integrations/comfyui)");
}

fs::path custom_nodes_of(const std::string& comfyui) {
  std::error_code ec;
  const fs::path dir(comfyui);
  if (!fs::is_regular_file(dir / "main.py", ec) || !fs::is_directory(dir / "custom_nodes", ec)) {
    throw Error("NotComfyUI", comfyui + " is not a ComfyUI folder (main.py and custom_nodes/ "
                                        "expected)");
  }
  return dir / "custom_nodes";
}

// What is at custom_nodes/genscope_comfyui now.
enum class Present { kNothing, kLink, kCopy, kForeign };

Present what_is_at(const fs::path& target) {
  std::error_code ec;
  const auto status = fs::symlink_status(target, ec);
  if (ec || status.type() == fs::file_type::not_found) return Present::kNothing;
  if (status.type() == fs::file_type::symlink) return Present::kLink;
  if (fs::is_directory(status) && fs::exists(target / kMarker, ec)) return Present::kCopy;
  return Present::kForeign;
}

void remove_ours(const fs::path& target, Present present) {
  std::error_code ec;
  if (present == Present::kLink) {
    fs::remove(target, ec);
  } else if (present == Present::kCopy) {
    fs::remove_all(target, ec);
  }
  if (ec) throw Error("RemoveFailed", "cannot remove " + target.string() + ": " + ec.message());
}

void copy_package(const fs::path& source, const fs::path& target) {
  const fs::path staging = target.parent_path() / (std::string(".") + kFolder + ".tmp");
  std::error_code ec;
  fs::remove_all(staging, ec);
  fs::create_directory(staging, ec);
  if (ec) throw Error("CopyFailed", "cannot create " + staging.string() + ": " + ec.message());
  for (auto it = fs::recursive_directory_iterator(source, ec); !ec && it != fs::end(it);
       it.increment(ec)) {
    const fs::path rel = fs::relative(it->path(), source);
    const std::string top = rel.begin()->string();
    if (top == "tests" || it->path().filename() == "__pycache__") {
      if (it->is_directory()) it.disable_recursion_pending();
      continue;
    }
    if (it->is_directory()) {
      fs::create_directories(staging / rel, ec);
    } else if (it->is_regular_file()) {
      fs::copy_file(it->path(), staging / rel, fs::copy_options::overwrite_existing, ec);
    }
    if (ec) break;
  }
  if (!ec) {
    std::ofstream marker(staging / kMarker);
    marker << "genscope " << version() << " copy of " << source.string() << "\n";
    if (!marker) ec = std::make_error_code(std::errc::io_error);
  }
  if (!ec) fs::rename(staging, target, ec);
  if (ec) {
    std::error_code ignored;
    fs::remove_all(staging, ignored);
    throw Error("CopyFailed", "cannot copy " + source.string() + " to " + target.string() + ": " +
                                  ec.message());
  }
}

void install(const std::string& comfyui, bool copy, const std::string& source_option) {
  const fs::path custom_nodes = custom_nodes_of(comfyui);
  const fs::path source = find_package(source_option);
  const fs::path target = custom_nodes / kFolder;
  const Present present = what_is_at(target);
  if (present == Present::kForeign) {
    throw Error("TargetExists", target.string() +
                                    " exists and is not a genscope install (no link, no " +
                                    kMarker + "); remove it yourself");
  }
  std::error_code ec;
  if (present == Present::kLink && !copy && fs::read_symlink(target, ec) == source && !ec) {
    std::cout << "already installed: " << target.string() << " -> " << source.string() << "\n";
    return;
  }
  remove_ours(target, present);
  if (copy) {
    copy_package(source, target);
    std::cout << "installed: " << target.string() << " (a copy of " << source.string() << ")\n";
  } else {
    fs::create_directory_symlink(source, target, ec);
    if (ec) {
      throw Error("LinkFailed", "cannot link " + target.string() + " -> " + source.string() +
                                    ": " + ec.message() + " (try --copy)");
    }
    std::cout << "installed: " << target.string() << " -> " << source.string() << "\n";
  }
  std::cout << "ComfyUI's Python must import genscope (scripts/setup installs it for Debian's "
               "python3); restart ComfyUI, then see GET /genscope/runs\n";
}

void uninstall(const std::string& comfyui) {
  const fs::path target = custom_nodes_of(comfyui) / kFolder;
  const Present present = what_is_at(target);
  if (present == Present::kNothing) {
    std::cout << "not installed: " << target.string() << " absent\n";
    return;
  }
  if (present == Present::kForeign) {
    throw Error("TargetNotOurs", target.string() + " is not a genscope install (no link, no " +
                                     kMarker + "); left alone");
  }
  remove_ours(target, present);
  std::cout << "uninstalled: " << target.string() << " removed; restart ComfyUI\n";
}

// Replaces this process with `python selftest.py COMFYUI_DIR [options]` (the package's driver).
void selftest(const std::string& comfyui, const std::string& python, const std::string& source,
              const std::vector<std::string>& passed) {
  custom_nodes_of(comfyui);  // a clear error before starting anything
  const fs::path script = find_package(source) / "selftest.py";
  std::error_code ec;
  if (!fs::is_regular_file(script, ec)) {
    throw Error("PackageNotFound", script.string() + " is missing: the package is older than "
                                                     "this genscope");
  }
  std::vector<std::string> args{python, script.string(), comfyui};
  args.insert(args.end(), passed.begin(), passed.end());
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::cout.flush();
  execvp(argv[0], argv.data());
  throw Error("ExecFailed", "cannot run " + python + ": " + std::strerror(errno) +
                                " (give ComfyUI's Python with --python)");
}

}  // namespace

void register_comfyui_command(CLI::App& app, CommandContext& context) {
  CLI::App* cmd = app.add_subcommand(
      "comfyui", "Install the genscope node package into ComfyUI, or check it against one");
  cmd->require_subcommand(1);
  struct Options {
    std::string comfyui, source;
    bool copy = false;
  };
  auto o = std::make_shared<Options>();
  CLI::App* in = cmd->add_subcommand(
      "install", "Link (or copy) the package into COMFYUI_DIR/custom_nodes/genscope_comfyui");
  in->add_option("comfyui_dir", o->comfyui, "The ComfyUI folder (has main.py, custom_nodes/)")
      ->required();
  in->add_flag("--copy", o->copy, "Copy the package instead of linking it");
  in->add_option("--source", o->source,
                 "The package folder (default: the installed one, "
                 "<prefix>/share/genscope/comfyui, else this build's checkout)");
  in->callback([o, &context] {
    install(o->comfyui, o->copy, o->source);
    context.exit_code = 0;
  });
  CLI::App* out = cmd->add_subcommand(
      "uninstall", "Remove COMFYUI_DIR/custom_nodes/genscope_comfyui (a link or a copy we made)");
  out->add_option("comfyui_dir", o->comfyui, "The ComfyUI folder")->required();
  out->callback([o, &context] {
    uninstall(o->comfyui);
    context.exit_code = 0;
  });
  struct SelftestOptions {
    std::string comfyui, python = "python3", source, checkpoint, pythonpath, record;
    int port = 0;
    bool keep = false;
  };
  auto t = std::make_shared<SelftestOptions>();
  CLI::App* st = cmd->add_subcommand(
      "selftest",
      "Check the package against a ComfyUI: start it on loopback with --cpu in a scratch folder, "
      "queue prompts (fresh, cached, failing, interrupted, async, no client id), compare node "
      "times and counts with ComfyUI's own messages; one verdict line per check, exit 1 on a "
      "failure, 2 when ComfyUI did not start");
  st->add_option("comfyui_dir", t->comfyui, "The ComfyUI folder (has main.py, custom_nodes/)")
      ->required();
  st->add_option("--python", t->python,
                 "The python3 that runs ComfyUI (it must import genscope; default python3)");
  st->add_option("--source", t->source, "The package folder (as for install)");
  st->add_option("--checkpoint", t->checkpoint,
                 "Also run a checkpoint -> sampler -> decode workflow with this checkpoint file");
  st->add_option("--pythonpath", t->pythonpath,
                 "A folder put first on ComfyUI's PYTHONPATH (where the genscope module is)");
  st->add_option("--record", t->record, "Write ComfyUI's messages of every prompt here (JSON)");
  st->add_option("--port", t->port, "The port (default: a free one)");
  st->add_flag("--keep", t->keep, "Keep the scratch folder");
  st->callback([t] {
    std::vector<std::string> passed;
    for (const auto& [flag, value] : {std::pair{"--checkpoint", t->checkpoint},
                                      std::pair{"--pythonpath", t->pythonpath},
                                      std::pair{"--record", t->record}}) {
      if (!value.empty()) passed.insert(passed.end(), {flag, value});
    }
    if (t->port != 0) passed.insert(passed.end(), {"--port", std::to_string(t->port)});
    if (t->keep) passed.emplace_back("--keep");
    selftest(t->comfyui, t->python, t->source, passed);
  });
}

}  // namespace genscope::cli
