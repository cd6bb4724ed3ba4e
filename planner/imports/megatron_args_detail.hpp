// megatron_args_detail.hpp: the reader behind import_megatron_args, shared by megatron_args.cpp (flags,
// parallelism, vocabulary) and megatron_reader.cpp (model, pipeline split, precision, recompute, world).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "planner/imports/launch.hpp"
#include "planner/imports/megatron_text.hpp"

namespace headroom::detail {

// The stages of a --pipeline-model-parallel-layout string in Megatron's order (stage k is virtual chunk
// k / pp of pipeline rank k % pp; pipeline_parallel_layer_layout.py).
struct pp_layout {
  std::vector<std::int64_t> decoder;  // t per stage
  std::vector<std::int64_t> mtp;      // m per stage
  std::int64_t embedding = 0, loss = 0;
  char first = 0, last = 0;  // the first and last layer symbols
};
// Returns the parsed layout; throws bad_input("--pipeline-model-parallel-layout", ...) naming the character.
pp_layout parse_pp_layout(const std::string& s);

class megatron_reader {
 public:
  megatron_reader(const launch_text& t, const std::string& origin);
  // Returns the launch; a refusal names the origin before the flag ("m.yaml: --num-layers: ...").
  launch_import run();

 private:
  const launch_text& m_text;
  std::string m_origin;
  std::map<std::string, std::vector<shell_word>> m_flags;
  launch_import m_out;

  void classify();
  bool has(const char* f) const;
  const shell_word* word(const char* f) const;  // throws when it refers to an unset variable
  std::optional<std::string> str(const char* f) const;
  std::optional<std::int64_t> integer(const char* f, std::int64_t lo, std::int64_t hi) const;
  std::optional<double> number(const char* f) const;
  std::optional<std::string> choice(const char* f, std::initializer_list<const char*> names) const;
  void derive(const std::string& field, const std::string& value, const std::string& why);
  void unmodelled(const std::string& flag, const std::string& why);

  void read_parallel();
  void read_loss();
  void read_fusions();
  std::optional<std::int64_t> known_vocab(std::string* why) const;
  std::int64_t read_vocab();
  void read_model();
  void read_shape(model_spec& m);
  void read_moe(model_spec& m);
  void read_dispatcher();
  void read_mla(model_spec& m);
  void read_split();
  void read_uneven_split(std::optional<std::int64_t> first, std::optional<std::int64_t> last, bool accounted);
  void read_layout(const std::string& s);
  void read_precision();
  void read_optimizer_dtypes();
  void read_recompute();
  void read_world();
  void read_workspaces();
  launch_import read_all();
  void check_consistency();
};

}  // namespace headroom::detail
