// model_files.hpp: where model specs come from: presets by name, model files, HuggingFace config.json.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model_spec.hpp"

namespace headroom {

// Returns the preset directory: $HEADROOM_PRESET_DIR when set, else the presets/ folder of the source tree
// this binary was built from.
std::string preset_dir();

// Returns the names of the presets in `dir` (file names without .json), sorted.
std::vector<std::string> list_presets(const std::string& dir);

// A preset name: a letter or digit, then letters, digits, '-', '_' or '.', at most 64 characters.
inline constexpr std::size_t max_preset_name = 64;
// Returns whether `name` is a preset name (no path, no "..", nothing a shell or a terminal would mangle).
bool is_preset_name(const std::string& name);

// Returns the preset `name` from `dir`. Throws bad_input("preset", ...) naming the known presets when
// `name` is not a preset name or there is no such file, and bad_input naming the field when the file is
// malformed or is not a regular file.
model_spec load_preset(const std::string& name, const std::string& dir);

// Returns the model in a file of the preset format. Throws bad_input on a missing file, malformed or
// truncated JSON, or a bad field.
model_spec load_model_file(const std::string& path);

// Returns the model a HuggingFace config.json describes: the dense families llama, mistral, qwen2, gpt2,
// gpt_neox, bloom, opt, falcon, and the mixture-of-experts families mixtral, qwen2_moe, qwen3_moe, deepseek_v2,
// deepseek_v3 (with multi-latent attention and MTP), gpt_oss, llama4 (its text_config), olmoe, dbrx (one row
// each in hf_families.hpp; absent keys take the family's HF configuration-class defaults). Throws bad_input
// naming a missing or absurd field, an unknown model_type, or a MoE key the family's code does not read.
model_spec model_from_hf_config(const nlohmann::json& config, const std::string& origin);
// Reads the file at `path`; a config without `_name_or_path` names the model by its path (model_name_of_file),
// not by its model_type, so the plan's title says which model it is.
model_spec load_hf_config(const std::string& path);

// Returns the name a model's file gives it: the file's stem ("Qwen3-30B-A3B" for Qwen3-30B-A3B.yaml), or its
// folder's name when the stem is "config" (a HuggingFace checkout's config.json); "" when neither names one.
std::string model_name_of_file(const std::string& path);

// Input limits of every JSON reader: a regular file of at most 64 MiB, nested at most 64 levels.
inline constexpr std::uintmax_t max_json_file_bytes = std::uintmax_t{64} << 20;
inline constexpr int max_json_depth = 64;

// Returns the bytes of the regular file at `path`, read whole. The one way every reader of an outside file
// opens it: the descriptor is opened non-blocking and checked with fstat after the open, so a FIFO, a
// device or a directory (even one swapped in after a check) is refused at once instead of hanging or
// reading without end, and no more than `cap` bytes are ever read. Throws bad_input(<path as shown>, ...)
// naming the problem: missing, a name too long, permission denied, not a regular file, larger than `cap`
// (`what` names the kind of input in that message: "a JSON input", "a snapshot").
std::string read_regular_file(const std::string& path, std::uintmax_t cap, const char* what);

// Returns `name` as an error message shows it: printable(name, 93) (format.hpp): control characters
// escaped, and a long name cut in the middle ("first...last"), so a 100 KB argument still gives a one-line
// error that says what went wrong.
std::string shown_name(const std::string& name);

// Returns the parsed JSON of a file; throws bad_input("<path>", "...") when missing, not a regular file,
// over the size limit, malformed, nested too deep or holding an unrepresentable number.
nlohmann::json read_json_file(const std::string& path);
// Returns the parsed JSON of `text`, with the same limits and errors (origin names it).
nlohmann::json parse_json_text(const std::string& text, const std::string& origin);

}  // namespace headroom
