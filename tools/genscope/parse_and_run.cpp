// Parsing a command line and running its subcommand, with genscope's error reporting: shared
// by the genscope program and genscope-demo.
#include <iostream>
#include <new>
#include <optional>
#include <string_view>

#include "command.hpp"
#include "genscope/error.hpp"
#include "memory_reserve.hpp"

namespace genscope::cli {

std::optional<int> split_off_command(CLI::App& app, const std::string& subcommand, int& argc,
                                     char** argv, std::vector<std::string>& command) {
  if (argc < 2 || argv[1] != subcommand) return std::nullopt;
  CLI::App* sub = app.get_subcommand(subcommand);
  for (int i = 2; i < argc; ++i) {
    const std::string_view arg(argv[i]);
    if (arg == "--") {  // the explicit end of genscope's options
      command.assign(argv + i + 1, argv + argc);
      argc = i;
      return std::nullopt;
    }
    if (arg.size() < 2 || arg[0] != '-') {  // CMD's first word: the rest is CMD's
      command.assign(argv + i, argv + argc);
      argc = i;
      return std::nullopt;
    }
    // One of genscope's options: a flag, or an option with its value attached (--x=v, -xv)
    // or in the next argument.
    const bool is_long = arg.size() > 2 && arg[1] == '-';
    const std::size_t eq = arg.find('=');
    const std::string name(is_long ? arg.substr(0, eq) : arg.substr(0, 2));
    const CLI::Option* option = sub->get_option_no_throw(name);
    if (option == nullptr) {
      std::cerr << "genscope: error [UnknownOption]: genscope " << subcommand << ": unknown option '"
                << name << "' before CMD (use -- before CMD when it starts with '-')\n";
      return 2;
    }
    const bool attached = is_long ? eq != std::string_view::npos : arg.size() > 2;
    if (option->get_items_expected_max() > 0 && option->get_items_expected_min() > 0 && !attached)
      ++i;  // its value
  }
  return std::nullopt;
}

int parse_and_run(CLI::App& app, CommandContext& context, int argc, char** argv) {
  arm_memory_reserve();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const std::bad_alloc&) {  // wherever it happened: reading, rendering, exporting
    std::cerr << "genscope: error [OutOfMemory]: " << kOutOfMemoryMessage << "\n";
    return 2;
  } catch (const genscope::Error& e) {
    std::cerr << "genscope: error [" << e.name() << "]: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "genscope: error: " << e.what() << "\n";
    return 2;
  }
  return context.exit_code;
}

}  // namespace genscope::cli
