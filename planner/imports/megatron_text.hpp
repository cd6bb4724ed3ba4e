// megatron_text.hpp: turns the text of a Megatron-LM launch (a bash script, a bare argument string, or the
// `--flag: value` YAML of yanring/Megatron-MoE-ModelZoo) into the argument words pretrain_gpt.py would
// receive, with the torchrun sizes and the script's variables. A small reader of the bash that launch scripts
// use (assignments, arrays, ${VAR:-default}, $((arithmetic)), if/elif/else on simple tests), not a shell: it
// never runs a command. Used by megatron_args.cpp only.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace headroom::detail {

// One word after expansion. `unresolved` names the variables it refers to that the text does not set
// ("1" for $1, "$(...)" for a command substitution); such a word is refused only where its value is read.
struct shell_word {
  std::string text;
  std::vector<std::string> unresolved;
};

struct launch_text {
  std::vector<shell_word> args;                 // what follows pretrain_gpt.py (or MODEL_ARGS)
  std::vector<shell_word> launcher;             // the words before the script (torchrun and its options)
  std::map<std::string, shell_word> variables;  // scalar variables at the end of the script
  std::vector<std::string> notes;               // what the reader did not evaluate, for --explain
  std::map<std::string, std::string> env_vars;  // ModelZoo's YAML: its ENV_VARS, as the launcher exports them
  bool yaml = false;
};

// Returns the launch in `text`. `env` holds variables set outside the text (the runner's TP=8 ...); the
// text's own assignments override them. Throws bad_input(origin, ...) when no command line is found (naming
// the YAML that a ModelZoo wrapper script launches, or the script another one runs with --flag arguments), a
// quote or ${ is unterminated, or the YAML is malformed. A YAML honours sbatch_benchmarking.sh's DISPATCHER
// when `env` or the text sets it: the dispatcher flags that script appends.
launch_text read_launch_text(const std::string& text, const std::string& origin,
                             const std::map<std::string, std::string>& env);

}  // namespace headroom::detail
