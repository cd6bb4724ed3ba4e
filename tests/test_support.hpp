// test_support.hpp: small helpers the planner tests share: loading presets and building problems.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "planner/errors.hpp"
#include "planner/layout.hpp"
#include "planner/ledger.hpp"
#include "planner/model_files.hpp"
#include "planner/recipe.hpp"
#include "planner/units.hpp"

namespace headroom {

// A mebibyte, as the probe tests write sizes.
inline constexpr std::int64_t MiB = mib;
#ifdef HEADROOM_TEST_DATA
// The test data folder (tests/data).
inline const std::string data = HEADROOM_TEST_DATA;
#endif

}  // namespace headroom

namespace headroom::test {

// Runs `f` and returns the message of the bad_input it throws, "" when it throws none.
template <class F>
std::string bad_input_of(F f) {
  try {
    f();
  } catch (const bad_input& e) {
    return e.what();
  }
  return "";
}

// Returns the problem for a preset with the reference case's defaults (bf16-adam, 192 GiB, 10 GiB reserve).
inline problem preset_problem(const std::string& name) {
  return default_problem(load_preset(name, preset_dir()));
}

inline layout make_layout(int gpus, int zero, recompute_mode r, int tp = 1, int pp = 1) {
  layout l;
  l.gpus = gpus;
  l.zero = zero;
  l.recompute = r;
  l.tp = tp;
  l.pp = pp;
  return l;
}

// Returns a model of the shape torchtitan's Llama-family blocks build: SwiGLU, RMSNorm, rotary positions, no
// biases, no dropout, untied embeddings; `layers` layers of width `hidden`, `heads` query heads of `head_dim`,
// `kv_heads` key/value heads, an FFN of `ffn` and a vocabulary of `vocab`.
inline model_spec swiglu_model(const std::string& name, std::int64_t layers, std::int64_t hidden, std::int64_t heads,
                               std::int64_t kv_heads, std::int64_t head_dim, std::int64_t ffn, std::int64_t vocab) {
  model_spec m;
  m.name = name;
  m.layers = layers;
  m.hidden = hidden;
  m.heads = heads;
  m.kv_heads = kv_heads;
  m.head_dim = head_dim;
  m.ffn_hidden = ffn;
  m.vocab = vocab;
  m.mlp = mlp_kind::swiglu;
  m.norm = norm_kind::rmsnorm;
  m.position = position_kind::rotary;
  m.tied_embeddings = false;
  m.dropout = false;
  m.linear_bias = false;
  return m;
}

// Returns the shape of a layer under torchtitan's per-op policy: `seq` tokens of micro-batch `b`, tp (with
// sequence parallelism when tp > 1), ep, expert tp and the attention kernel.
inline ledger_shape op_shape(std::int64_t seq, std::int64_t b, int tp, int ep, int etp,
                             attention_kind a = attention_kind::flash) {
  ledger_shape s(seq, b, tp, tp > 1, 1, a, 2);
  s.ep = ep;
  s.etp = etp;
  s.op_policy = true;
  return s;
}

// Returns the bytes of each ledger entry, by name.
inline std::map<std::string, std::int64_t> bytes_by_name(const std::vector<ledger_entry>& v) {
  std::map<std::string, std::int64_t> m;
  for (const auto& e : v) m[e.name] = e.bytes;
  return m;
}

// Returns the bytes of each ledger entry the per-op policy keeps for backward, by name.
inline std::map<std::string, std::int64_t> op_kept(const std::vector<ledger_entry>& v) {
  std::map<std::string, std::int64_t> kept;
  for (const auto& e : v)
    if (kept_for_backward(e, recompute_mode::selective_op, default_recompute_modules)) kept[e.name] = e.bytes;
  return kept;
}

// Returns bytes in GiB rounded to `decimals`, the way docs/reference-case.md prints them.
inline double rounded_gib(std::int64_t bytes, int decimals = 1) {
  double f = 1;
  for (int i = 0; i < decimals; ++i) f *= 10;
  return static_cast<double>(static_cast<long long>(to_gib(bytes) * f + 0.5)) / f;
}

}  // namespace headroom::test
