// megatron_args.hpp: the Megatron-LM launch importer (--megatron-args). Reads a pretrain_gpt.py command line
// (a bash launch script with arrays and torchrun, a bare argument string) or the `--flag: value` YAML of
// yanring/Megatron-MoE-ModelZoo, and returns one launch_import: the model with Megatron's derived defaults
// (each recorded in `derived`), the layout, training and recipe pieces, and every other flag classified as
// unused (no effect on memory) or unmodelled (changes memory, not modelled; unknown flags too).
#pragma once

#include <map>
#include <string>

#include "planner/imports/launch.hpp"

namespace headroom {

// Returns the launch `text` states. `origin` names it in errors ("megatron arguments", a path). `env` holds
// variables set outside the text (ModelZoo's runner sets TP, PP, MBS ... before envsubst); the text's own
// assignments override them. Throws bad_input naming the flag and the problem: a flag missing its value, a
// non-integer where an integer is needed, a value that refers to a variable nothing sets, a layout string
// that does not parse (with the character), or flags that contradict each other.
launch_import import_megatron_args(const std::string& text, const std::string& origin,
                                   const std::map<std::string, std::string>& env = {});

// Returns import_megatron_args of the file `file_or_string` names when it is a readable regular file (at
// most 4 MiB); of such a file with the --flag words after it appended to its arguments when it is "FILE --flag
// ..." (as ModelZoo's sbatch_benchmarking.sh appends its own arguments to a YAML's); else of the string itself
// (origin "megatron arguments").
launch_import load_megatron_args(const std::string& file_or_string,
                                 const std::map<std::string, std::string>& env = {});

}  // namespace headroom
