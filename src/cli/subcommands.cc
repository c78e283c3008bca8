#include "cli/subcommands.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <optional>

#include "manager/plan/wave.h"
#include "manager/rules/label_selector.h"

namespace dm::cli {

namespace {

// "-o=json" is urfave/cli's (Go flag) spelling of a short option with a value, and "--selector=" that of an
// empty one; CLI11 wants "-o json" and "--selector ''".
std::vector<std::string> split_short_equals(const std::vector<std::string>& args) {
  std::vector<std::string> out;
  for (const auto& a : args) {
    if (a.size() > 3 && a[0] == '-' && a[1] != '-' && a[2] == '=') {
      out.push_back(a.substr(0, 2));
      out.push_back(a.substr(3));
    } else if (a.size() > 3 && a.starts_with("--") && a.back() == '=') {
      out.push_back(a.substr(0, a.size() - 1));  // "--selector=": an empty value
      out.emplace_back();
    } else {
      out.push_back(a);
    }
  }
  return out;
}

// Runs CLI11 over `args`; unknown arguments are a usage error in urfave/cli's words.
void run(CLI::App& app, const std::vector<std::string>& args, SubcommandParse& p) {
  app.allow_extras();
  std::vector<std::string> reversed(args.rbegin(), args.rend());
  try {
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    p.error = e.what();
    return;
  }
  const auto rest = app.remaining();
  if (!rest.empty() && rest.front() != "--") p.error = "flag provided but not defined: " + rest.front();
}

struct PlanArgs {
  std::string output = "text";
  bool all_nodes = false;
  std::optional<std::string> selector;
};

// plan: the node or a wave of nodes, and the output format.
void check_plan(const PlanArgs& a, SubcommandParse& p, ParseResult& out) {
  if (a.output != "text" && a.output != "json") {
    p.error = "invalid value \"" + a.output + "\" for flag -o/--output: text or json";
    return;
  }
  out.output = a.output;
  if (a.selector) {
    if (auto sel = manager::LabelSelector::parse(*a.selector); !sel) {
      p.error = "invalid value \"" + *a.selector + "\" for flag --selector: " + sel.error().message;
      return;
    }
  }
  if ((a.all_nodes || a.selector) && p.node_name_given) {
    p.error = "--node-name plans one node, --all-nodes and --selector a wave of nodes: give one or the other";
    return;
  }
  if (a.selector) {
    out.wave_selector = *a.selector;
  } else if (a.all_nodes) {
    out.wave_selector = manager::WaveSelection::kDefaultSelector;
  }
}

}  // namespace

SubcommandParse parse_subcommand(const std::string& command, const std::vector<std::string>& args,
                                 ParseResult& out) {
  SubcommandParse p;
  CLI::App app;
  app.set_help_flag();
  app.add_flag("-h,--help", p.help);
  std::string node;
  PlanArgs plan;
  app.add_option("--node-name", node)->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  if (command == "recover") app.add_flag("--force", out.force);
  if (command == "plan") {
    app.add_option("-o,--output", plan.output)->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    app.add_flag("--all-nodes", plan.all_nodes);
    app.add_option("--selector", plan.selector)->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  }
  run(app, split_short_equals(args), p);
  if (!p.error.empty() || p.help) return p;
  if (app.count("--node-name") > 0) {
    out.settings.node_name = node;
    p.node_name_given = true;
  }
  if (command == "plan") check_plan(plan, p, out);
  return p;
}

}  // namespace dm::cli
