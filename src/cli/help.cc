// driver-manager's help text, urfave/cli's layout: NAME, USAGE, VERSION, COMMANDS (with the options of
// recover and plan), GLOBAL OPTIONS (from the flag table, each with its default and variable).
#include <fmt/format.h>

#include "cli/flags.h"
#include "cli/options.h"

namespace dm::cli {

namespace {

constexpr const char* kCommands =
    "   uninstall_driver  take the GPU clients off the node, unload the NVIDIA driver and restore the "
    "clients\n"
    "   preflight_check   check that driver-manager can start (configuration and Kubernetes access)\n"
    "   recover           undo what a killed run left on the node (its taint, cordon, paused labels, "
    "lease);\n"
    "                     options: --node-name value, --force (even while a run's lease is live)\n"
    "   plan              print what uninstall_driver would do on the node now, changing nothing;\n"
    "                     options: --node-name value, -o, --output text|json (default: text),\n"
    "                     --all-nodes (a wave over the nodes with nvidia.com/gpu.deploy.driver=true),\n"
    "                     --selector value (a wave over the nodes this label selector picks; \"\": all)\n"
    "   help, h           Shows a list of commands or help for one command\n";

}  // namespace

std::string help_text(const VersionInfo& version) {
  std::string out;
  out += "NAME:\n   driver-manager - prepare a node for a (re)install of the containerized NVIDIA driver\n\n";
  out += "USAGE:\n   driver-manager [global options] command [command options]\n\n";
  out += "VERSION:\n   " + version.version + "\n\n";
  out += "COMMANDS:\n";
  out += kCommands;
  out += "\nGLOBAL OPTIONS:\n";
  const ParseResult defaults;
  for (const auto& f : global_flags()) {
    std::string left = "--" + f.name + (f.kind == Kind::kBool ? "" : " value");
    std::string right = f.usage;
    // Like urfave/cli: a required flag and an empty string show no default.
    if (const std::string def = f.shown(defaults);
        !def.empty() && f.name != "node-name" && f.name != "vfio-manage") {
      right += " (default: " + def + ")";
    }
    if (!f.env.empty()) right += " [$" + f.env + "]";
    out += fmt::format("   {:<40} {}\n", left, right);
  }
  out += fmt::format("   {:<40} {}\n", "--help, -h", "show help");
  out += fmt::format("   {:<40} {}\n", "--version, -v", "print the version");
  return out;
}

}  // namespace dm::cli
