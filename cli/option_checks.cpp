// option_checks.cpp: options refused where they cannot apply (option_checks.hpp).
#include "option_checks.hpp"

#include <algorithm>
#include <cctype>

#include "launch_options.hpp"
#include "planner/errors.hpp"
#include "planner/format.hpp"
#include "planner/json_fields.hpp"

namespace headroom::cli {

void check_options_apply(const plan_options& o, const problem& p) {
  const bool zero_given = fixed_for_search(o, "--zero");  // not an axis --search freed
  if (zero_given && o.zero < 3)
    // (--no-reshard-after-forward counts as --reshard-after-forward, its negation)
    for (const char* flag : {"--zero3-live-params", "--zero3-inflight-units", "--reshard-after-forward",
                             "--offload-params"})
      if (o.app && o.app->count(flag) > 0)
        throw bad_input(flag + 2, std::string("applies to ZeRO-3 / FSDP (--zero 3), not --zero ") +
                                      std::to_string(o.zero));
  if (zero_given && o.zero == 0 && o.dp_replicate > 1)
    throw bad_input("dp-replicate", "hybrid sharding replicates over groups that shard (--zero 1, 2 or 3), not "
                                    "--zero 0: with no sharding every rank is a replica already");
  if (given(o, "--etp") && o.etp < 1) throw bad_input("etp", "must be at least 1 (give --etp N, or leave it out for tp)");
  if (!o.recompute_modules.empty()) {
    if (given(o, "--recompute") && o.recompute != "selective")
      throw bad_input("recompute-modules", "applies to --recompute selective, not --recompute " + o.recompute);
    for (const auto& name : o.recompute_modules) {
      const auto m = parse_name<recompute_module>(name);
      if (!m) continue;  // problem_from names an unknown module
      const bool moe_module = *m == recompute_module::moe || *m == recompute_module::moe_act ||
                              *m == recompute_module::shared_experts;
      const char* lacks = moe_module && !p.model.moe.enabled() ? "no experts"
                          : *m == recompute_module::shared_experts && p.model.moe.shared_ffn == 0
                              ? "no shared experts"
                          : *m == recompute_module::mla_up_proj && !p.model.mla.enabled() ? "no multi-latent attention"
                                                                                           : nullptr;
      if (lacks)
        throw bad_input("recompute-modules",
                        "'" + name + "' is not a module of " + p.model.name + " (" + lacks + ")");
    }
  }
}

std::string meant_option(const std::string& word, const std::vector<std::string>& options) {
  if (word.rfind("--", 0) != 0 || word.size() < 3 || !std::isalpha(static_cast<unsigned char>(word[2]))) return "";
  const std::string name = word.substr(0, word.find('='));
  if (std::find(options.begin(), options.end(), name) != options.end()) return "";
  return detail::closest_name(name, options);
}

std::vector<std::string> option_names(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::Option* opt : app.get_options())
    for (const auto& n : opt->get_lnames()) names.push_back("--" + n);
  for (const CLI::App* sub : app.get_subcommands({}))
    if (dynamic_cast<const CLI::Option_group*>(sub))
      for (auto& n : option_names(*sub)) names.push_back(std::move(n));
  return names;
}

namespace {
// Returns whether some option named `name` (without dashes) of `app`, its subcommands or option groups
// separates its values by commas.
bool comma_separated(const CLI::App& app, const std::string& name) {
  for (const CLI::Option* opt : app.get_options())
    if (opt->check_lname(name) && opt->get_delimiter() == ',') return true;
  for (const CLI::App* sub : app.get_subcommands({}))
    if (comma_separated(*sub, name)) return true;
  return false;
}
}  // namespace

namespace {
// Returns `word` without one pair of matching quotes around it (an observed row's `--opt="a,b"` keeps them).
std::string unquoted(const std::string& word) {
  if (word.size() >= 2 && (word.front() == '"' || word.front() == '\'') && word.back() == word.front())
    return word.substr(1, word.size() - 2);
  return word;
}
}  // namespace

std::optional<bad_input> empty_list_item(const CLI::App& app, const std::vector<std::string>& words) {
  for (std::size_t i = 0; i < words.size(); ++i) {
    const std::string& w = words[i];
    if (w == "--") break;  // what follows is no option's
    if (w.size() < 3 || w.compare(0, 2, "--") != 0) continue;
    const std::size_t eq = w.find('=');
    const std::string name = w.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
    // A word with a space in its name is a value (a --megatron-args string), not an option.
    if (name.find_first_of(" \t") != std::string::npos || !comma_separated(app, name)) continue;
    // The option's values as CLI11 takes them: the rest of its word after '=', or the words up to the next
    // option, each split at its commas. The list as written: the words joined, a comma between two words
    // unless one already stands there ("8, 8" is "8,8"), without the brackets CLI11 also takes.
    std::vector<std::string> values;
    if (eq != std::string::npos) values.push_back(unquoted(w.substr(eq + 1)));
    for (std::size_t j = i + 1; eq == std::string::npos && j < words.size() && words[j].rfind('-', 0) != 0;
         ++j)
      values.push_back(unquoted(words[j]));
    std::string list;
    for (const auto& v : values) {
      if (!list.empty() && !v.empty() && list.back() != ',' && v.front() != ',') list += ',';
      list += v;
    }
    if (list.size() >= 2 && list.front() == '[' && list.back() == ']') list = list.substr(1, list.size() - 2);
    if (list.find(',') == std::string::npos) continue;
    if (list.front() == ',' || list.back() == ',' || list.find(",,") != std::string::npos)
      return bad_input(name,
                       "'" + printable(list, 60) +
                           "' has an empty item (two commas together, or one at an end): give one value "
                           "between each pair of commas");
  }
  return std::nullopt;
}

}  // namespace headroom::cli
