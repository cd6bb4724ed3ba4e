// option_checks.hpp: the options of `plan` (and of every command that takes its problem options) that depend on
// another, checked in one place, so an option that cannot apply is refused rather than ignored; and a list
// value with an empty item, which CLI11 would shorten without a word.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "plan_command.hpp"
#include "planner/errors.hpp"

namespace headroom::cli {

// Refuses an option that cannot apply to the plan it is given with, rather than ignoring it: the one check for
// options that depend on another (issue 34, class E). Where an axis is searched (not given), its dependants are checked against what was given only.
void check_options_apply(const plan_options& o, const problem& p);

// Returns every long option name `app` takes ("--preset"), its option groups' included (CLI11 keeps a group's
// options in the group, not in get_options()): what a did-you-mean compares a mistyped option with.
std::vector<std::string> option_names(const CLI::App& app);

// Returns the option among `options` that command-line word `word` ("--presett", "--gpuss=8") most likely
// meant, or "" when it is no option's name at all ("--", "--1"), is itself an option, or is near none
// (planner/json_fields.hpp closest_name).
std::string meant_option(const std::string& word, const std::vector<std::string>& options);

// Returns the refusal of a value with an empty item ("tp,,pp", "31,32,") given to an option whose values are
// separated by commas, or nullopt. CLI11 drops an empty item silently, which would plan another list than
// the one given. `words` are the command line's (or an observed row's flags); every subcommand and option
// group of `app` is searched for the option.
std::optional<bad_input> empty_list_item(const CLI::App& app, const std::vector<std::string>& words);

}  // namespace headroom::cli
