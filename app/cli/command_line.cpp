// Global options anywhere and the subcommand suggestion of command_line.h.
#include "cli/command_line.h"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <string_view>

#include "core/nearest_name.h"

namespace ringmaster::cli {

namespace {

constexpr std::string_view kJsonFlag = "--json";

// The subcommands of `app` (not its option groups, which CLI11 keeps as nameless subcommands).
std::vector<const CLI::App*> subcommandsOf(const CLI::App& app) {
  return app.get_subcommands(
      [](const CLI::App* subcommand) { return !subcommand->get_name().empty(); });
}

// The index in `args` of the first word before any subcommand that is neither an option of `app`
// nor an option's value (the subcommand's name, or a misspelling of one); args.size() if none.
size_t firstWordOf(const CLI::App& app, const std::vector<std::string>& args) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") return args.size();
    if (!arg.starts_with("-") || arg == "-") return i;
    if (arg.find('=') != std::string::npos) continue;  // --db=X holds its value
    const CLI::Option* option = app.get_option_no_throw(arg);
    if (option != nullptr && option->get_items_expected_min() > 0) ++i;  // --db X
  }
  return args.size();
}

// The subcommand of `app` called `name`, or null (CLI11's get_subcommand throws).
const CLI::App* subcommandNamed(const CLI::App& app, const std::string& name) {
  for (const CLI::App* subcommand : subcommandsOf(app))
    if (subcommand->check_name(name)) return subcommand;
  return nullptr;
}

}  // namespace

void takeGlobalOptionsAnywhere(CLI::App& app) {
  app.fallthrough();
}

std::vector<std::string> withGlobalFlagsAfterSubcommand(const CLI::App& app,
                                                        std::vector<std::string> args) {
  const size_t name = firstWordOf(app, args);
  if (name == args.size()) return args;
  const CLI::App* subcommand = subcommandNamed(app, args[name]);
  if (subcommand == nullptr || subcommand->get_option_no_throw(std::string(kJsonFlag)) == nullptr)
    return args;
  const auto before_end = args.begin() + static_cast<std::ptrdiff_t>(name);
  const auto moved = std::stable_partition(args.begin(), before_end,
                                           [](const std::string& arg) { return arg != kJsonFlag; });
  // [moved, before_end) are the --json flags; the subcommand's name is just after them.
  std::rotate(moved, before_end, before_end + 1);
  return args;
}

std::optional<std::string> unknownSubcommandMessage(const CLI::App& app,
                                                    const std::vector<std::string>& args) {
  const size_t word = firstWordOf(app, args);
  if (word == args.size() || subcommandNamed(app, args[word]) != nullptr) return std::nullopt;
  std::vector<std::string_view> names;
  for (const CLI::App* subcommand : subcommandsOf(app)) {
    if (!subcommand->get_group().empty()) names.emplace_back(subcommand->get_name());  // listed
  }
  const std::string_view near = closestName(args[word], names);
  if (near.empty())
    return fmt::format("unknown subcommand '{}' (`ringmaster --help` lists them)", args[word]);
  return fmt::format("unknown subcommand '{}' (did you mean '{}'?)", args[word], near);
}

}  // namespace ringmaster::cli
