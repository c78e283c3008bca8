// The options of the sub-commands that take any (recover, plan), parsed by CLI11 from the arguments after
// the sub-command's name, as the global options are from those before it.
#pragma once

#include <string>
#include <vector>

#include "cli/options.h"

namespace dm::cli {

struct SubcommandParse {
  bool help = false;             // -h / --help: show help, exit 0
  bool node_name_given = false;  // --node-name was given
  std::string error;             // "" or the usage error ("flag provided but not defined: --x", ...)
};

// Parses `args` (what follows `command`, "recover" or "plan", on the command line) into `out`.
SubcommandParse parse_subcommand(const std::string& command, const std::vector<std::string>& args,
                                 ParseResult& out);

}  // namespace dm::cli
