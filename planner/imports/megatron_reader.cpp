// megatron_reader.cpp: the readers of megatron_args_detail.hpp that fill the model (with Megatron's derived
// defaults), the pipeline split, the precision recipe, recompute and the world size. Line numbers cite
// NVIDIA/Megatron-LM @ d98e8a64: megatron/training/arguments.py unless another file is named.
#include <algorithm>
#include <cctype>
#include <cstring>

#include "planner/errors.hpp"
#include "planner/format.hpp"
#include "planner/imports/megatron_args_detail.hpp"
#include "planner/layout.hpp"
#include "planner/model_spec.hpp"

namespace headroom::detail {

namespace {
// Returns `s` without one pair of matching outer quotes: launchers that pass a value through two shells
// write "'Et|(tt|)*30mL'" (Megatron-MoE-ModelZoo best_practice/kimi-k2/run_kimi_k2_gb200_128k_G128.sh).
std::string unquoted(const std::string& s) {
  if (s.size() >= 2 && (s[0] == '\'' || s[0] == '"') && s.back() == s[0]) return s.substr(1, s.size() - 2);
  return s;
}
std::string str_of(std::int64_t v) {
  return std::to_string(v);
}
}  // namespace

pp_layout parse_pp_layout(const std::string& s) {
  const char* flag = "--pipeline-model-parallel-layout";
  const auto fail = [&](std::size_t at, const std::string& why) {
    throw bad_input(flag, why + " at character " + str_of(static_cast<std::int64_t>(at + 1)) + " of '" +
                              printable(s, 80) + "'");
  };
  constexpr std::size_t cap = 1'000'000;
  std::string flat;
  for (std::size_t i = 0; i < s.size();) {
    const std::size_t at = i;
    std::string unit;
    if (s[i] == ',' || s[i] == ' ') {
      ++i;
      continue;
    }
    if (s[i] == '(') {
      const std::size_t e = s.find(')', i);
      if (e == std::string::npos) fail(i, "'(' is not closed");
      for (std::size_t k = i + 1; k < e; ++k)
        if (!std::strchr("EtmL|, ", s[k]) || s[k] == '\0')
          fail(k, "unexpected '" + printable(s.substr(k, 1)) + "' inside ( )");
        else if (s[k] != ',' && s[k] != ' ')
          unit += s[k];
      i = e + 1;
      if (i >= s.size() || s[i] != '*') fail(i, "a ( ) group needs '*N' after it");
    } else if (s[i] != '\0' && std::strchr("EtmL|", s[i])) {
      unit = s.substr(i++, 1);
    } else {
      fail(i, "unexpected '" + printable(s.substr(i, 1)) + "' (layers are E, t, m, L; | ends a stage)");
    }
    std::int64_t n = 1;
    if (i < s.size() && s[i] == '*') {
      const std::size_t d = ++i;
      while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i])) && i - d < 7) ++i;
      if (i == d) fail(d, "'*' needs a count");
      n = std::stoll(s.substr(d, i - d));
    }
    if (flat.size() + unit.size() * static_cast<std::size_t>(n) > cap)
      fail(at, "expands to over 1,000,000 symbols");
    for (std::int64_t k = 0; k < n; ++k) flat += unit;
  }
  pp_layout p{{0}, {0}};
  for (const char c : flat) {
    if (c == '|') {
      p.decoder.push_back(0), p.mtp.push_back(0);
      continue;
    }
    if (!p.first) p.first = c;
    p.last = c;
    if (c == 't') ++p.decoder.back();
    if (c == 'm') ++p.mtp.back();
    if (c == 'E') ++p.embedding;
    if (c == 'L') ++p.loss;
  }
  return p;
}

void megatron_reader::read_model() {
  if (!has("--num-layers") && !has("--hidden-size") && !has("--num-attention-heads")) {
    derive("model", "not stated",
           "no --num-layers / --hidden-size / --num-attention-heads: the model comes from "
           "--preset or --model");
    return;
  }
  (void)integer("--num-layers", 1, 100'000);  // a malformed value is the first error to report
  for (const char* f : {"--num-layers", "--hidden-size", "--num-attention-heads"})
    if (!has(f)) throw bad_input(f, "is missing: the launch states part of the model's shape");
  model_spec m;
  m.name = "megatron";
  m.source = m_origin;
  read_shape(m);
  m.vocab = read_vocab();
  read_moe(m);
  read_mla(m);
  validate(m);
  m_out.model = m;
}

void megatron_reader::read_shape(model_spec& m) {
  m.layers = *integer("--num-layers", 1, 100'000);
  m.hidden = *integer("--hidden-size", 1, 1 << 20);
  m.heads = *integer("--num-attention-heads", 1, 1 << 16);
  m.kv_heads = m.heads;
  if (has("--group-query-attention")) {
    // TransformerConfig: num_query_groups defaults to the head count.
    m.kv_heads = integer("--num-query-groups", 1, m.heads).value_or(m.heads);
  } else if (has("--num-query-groups")) {
    derive("kv_heads", str_of(m.heads), "--num-query-groups is ignored without --group-query-attention");
  }
  if (const auto kv = integer("--kv-channels", 1, 1 << 16)) {
    m.head_dim = *kv, m.head_dim_stated = true;
  } else {
    if (m.hidden % m.heads != 0)
      throw bad_input("--num-attention-heads",
                      "does not divide --hidden-size and --kv-channels is not given");
    m.head_dim = m.hidden / m.heads;
    derive("head_dim", str_of(m.head_dim), "kv_channels = hidden / heads (l.1331-1333)");
  }
  m.mlp = has("--swiglu") ? mlp_kind::swiglu : mlp_kind::gelu;
  if (const auto f = integer("--ffn-hidden-size", 1, std::int64_t{1} << 24)) {
    m.ffn_hidden = *f;
  } else {
    m.ffn_hidden = has("--swiglu") ? (8 * m.hidden / 3) / 64 * 64 : 4 * m.hidden;
    derive("ffn_hidden", str_of(m.ffn_hidden),
           has("--swiglu") ? "SwiGLU: floor((8h/3) / 64) x 64 (l.1320-1329)" : "4h (l.1320-1329)");
  }
  const auto norm = choice("--normalization", {"LayerNorm", "RMSNorm"});
  m.norm = norm == "RMSNorm" ? norm_kind::rmsnorm : norm_kind::layernorm;
  if (!norm) derive("norm", "layernorm", "--normalization defaults to LayerNorm");
  auto pos =
      choice("--position-embedding-type", {"learned_absolute", "rope", "mrope", "yarn", "relative", "none"})
          .value_or(has("--use-rotary-position-embeddings") ? "rope" : "learned_absolute");
  if (pos == "relative")
    unmodelled("--position-embedding-type", "relative position buckets; priced as rotary");
  if (pos == "learned_absolute" && has("--no-position-embedding")) pos = "none";
  m.position = pos == "learned_absolute" ? position_kind::learned : position_kind::rotary;
  if (pos != "rope" && pos != "learned_absolute")
    derive("position", "rotary", "position '" + pos + "' has no table: priced as rotary (no parameters)");
  m.tied_embeddings = !has("--untie-embeddings-and-output-weights");
  m.linear_bias = !has("--disable-bias-linear");
  m.qkv_bias_only = !m.linear_bias && has("--add-qkv-bias");
  if (const auto seq = m_out.seq) m.seq = *seq;
  m.max_positions = integer("--max-position-embeddings", 1, std::int64_t{1} << 30).value_or(m.seq);
  const double attn = number("--attention-dropout").value_or(0.1),
               hid = number("--hidden-dropout").value_or(0.1);
  m.dropout = attn > 0 || hid > 0;  // both default to 0.1 (TransformerConfig)
  derive("dropout", m.dropout ? "true" : "false",
         "attention dropout " + fixed(attn, 2) + ", hidden dropout " + fixed(hid, 2) + " (default 0.1 each)");
}

void megatron_reader::read_moe(model_spec& m) {
  m.moe.mtp_layers = integer("--mtp-num-layers", 0, 1000).value_or(0);
  if (!has("--num-experts")) return;
  m.moe.experts = *integer("--num-experts", 0, 1'000'000);
  if (m.moe.experts == 0)  // Megatron reads 0 as no experts: a dense model (arguments.py l.1648-1649)
    return derive("moe", "dense", "--num-experts 0 is None in Megatron: every layer dense (arguments.py l.1648)");
  m.moe.top_k = integer("--moe-router-topk", 1, m.moe.experts).value_or(2);
  if (!has("--moe-router-topk"))
    derive("moe.top_k", "2", "--moe-router-topk defaults to 2 (transformer_config.py l.760)");
  if (const auto f = integer("--moe-ffn-hidden-size", 1, std::int64_t{1} << 24)) {
    m.moe.expert_ffn = *f;
  } else {
    m.moe.expert_ffn = m.ffn_hidden;
    derive("moe.expert_ffn", str_of(m.ffn_hidden),
           "moe_ffn_hidden_size = ffn_hidden_size (transformer_config.py)");
  }
  m.moe.shared_ffn = integer("--moe-shared-expert-intermediate-size", 1, std::int64_t{1} << 24).value_or(0);
  m.moe.shared_gate = has("--moe-shared-expert-gate");
  m.moe.router_bias = has("--moe-router-enable-expert-bias");
  const std::string freq = unquoted(str("--moe-layer-freq").value_or("1"));
  if (!freq.empty() && freq.find_first_not_of("0123456789") == std::string::npos && freq.size() < 7) {
    const std::int64_t every = std::stoll(freq);
    if (every < 1) throw bad_input("--moe-layer-freq", "must be at least 1");
    m.moe.layers = moe_layer_pattern(m.layers, 0, every, 0);
    derive("moe.layers", "every " + freq,
           "layer i is MoE iff i % " + freq + " == 0 (gpt_layer_specs.py l.649)");
  } else {
    m.moe.layers = parse_layer_pattern(freq, "--moe-layer-freq");
    if (static_cast<std::int64_t>(m.moe.layers.size()) != m.layers)
      throw bad_input("--moe-layer-freq", "gives " + str_of(static_cast<std::int64_t>(m.moe.layers.size())) +
                                              " layers but --num-layers is " + str_of(m.layers));
  }
  m_out.capacity_factor = number("--moe-expert-capacity-factor");
  m_out.pad_to_capacity = has("--moe-pad-expert-input-to-capacity");
  read_dispatcher();
  if (m_out.ep && m.moe.experts % *m_out.ep != 0)
    throw bad_input("--expert-model-parallel-size",
                    str_of(*m_out.ep) + " does not divide --num-experts " + str_of(m.moe.experts) +
                        ", as Megatron requires (arguments.py validate_args): use an ep dividing it");
}

// --qk-layernorm (transformer_config.py l.259) builds different norms by attention kind (gpt_layer_specs.py
// @ d98e8a64). With multi-latent attention it is what makes q_up and kv_up LayerNormLinear (l.104-115): the
// latent norms the MLA ledger always prices (attn.q_norm.output, attn.kv_norm.output). Without MLA it
// puts a norm over head_dim on each head of q and k (l.149-152, q_layernorm / k_layernorm): qk_norm.
void megatron_reader::read_mla(model_spec& m) {
  const bool qk = has("--qk-layernorm");
  if (!has("--multi-latent-attention")) {
    m.qk_norm = qk;
    if (qk) derive("qk_norm", "true", "--qk-layernorm: a norm over head_dim on each head of q and k (l.149-152)");
    return;
  }
  if (qk)
    derive("mla latent norms", "priced",
           "--qk-layernorm: q_up and kv_up are LayerNormLinear (gpt_layer_specs.py l.104-115)");
  else
    unmodelled("--multi-latent-attention",
               "without --qk-layernorm Megatron builds no latent norms (gpt_layer_specs.py l.104-115); priced "
               "with their outputs (attn.q_norm.output, attn.kv_norm.output: q_lora + kv_lora per token)");
  // argparse defaults (l.3548-3556) differ from DeepSeek's: every one that is absent is noted.
  const auto rank = [&](const char* f, std::int64_t def, const char* field) {
    const auto v = integer(f, 0, 1 << 20);
    if (!v) derive(field, str_of(def), std::string(f) + " defaults to " + str_of(def) + " (l.3548-3556)");
    return v.value_or(def);
  };
  m.mla.q_lora_rank = rank("--q-lora-rank", 0, "mla.q_lora_rank");
  m.mla.kv_lora_rank = rank("--kv-lora-rank", 32, "mla.kv_lora_rank");
  m.mla.qk_nope_head_dim = rank("--qk-head-dim", 128, "mla.qk_nope_head_dim");
  m.mla.qk_rope_head_dim = rank("--qk-pos-emb-head-dim", 64, "mla.qk_rope_head_dim");
  m.mla.v_head_dim = rank("--v-head-dim", 128, "mla.v_head_dim");
  if (m.mla.kv_lora_rank < 1)
    throw bad_input("--kv-lora-rank", "must be positive with --multi-latent-attention");
}

void megatron_reader::read_layout(const std::string& s) {
  const pp_layout p = parse_pp_layout(s);
  const char* f = "--pipeline-model-parallel-layout";
  if (p.embedding != 1 || p.first != 'E') throw bad_input(f, "needs exactly one E, as its first layer");
  if (p.loss != 1 || p.last != 'L') throw bad_input(f, "needs exactly one L, as its last layer");
  const auto stages = static_cast<std::int64_t>(p.decoder.size());
  const std::int64_t pp = m_out.pp.value_or(1);
  if (stages % pp != 0)
    throw bad_input(f, "has " + str_of(stages) +
                           " stages, not a multiple of --pipeline-model-parallel-size " + str_of(pp));
  std::int64_t t = 0, mtp = 0;
  for (std::size_t k = 0; k < p.decoder.size(); ++k) {
    t += p.decoder[k], mtp += p.mtp[k];
    if (p.mtp[k] && k + 1 != p.decoder.size())
      unmodelled(f, "MTP on stage " + str_of(static_cast<std::int64_t>(k)) + ", priced on the last stage");
  }
  if (m_out.model && t != m_out.model->layers)
    throw bad_input(f, "holds " + str_of(t) + " t layers but --num-layers is " + str_of(m_out.model->layers));
  const std::int64_t want = m_out.model ? m_out.model->moe.mtp_layers : 0;
  if (mtp != want)
    throw bad_input(f, "holds " + str_of(mtp) + " m layers but --mtp-num-layers is " + str_of(want));
  m_out.split = pipeline_split{p.decoder, 0, 0, false, false};
  m_out.vpp = static_cast<int>(stages / pp);
  derive(
      "split.layers", str_of(stages) + " stages",
      "decoder layers per stage of " + printable(s, 60) + ", stage k = virtual chunk k / pp of rank k % pp");
  derive("vpp", str_of(stages / pp), "stages / pp (l.940-952)");
}

// --decoder-first/last-pipeline-num-layers: those stages take their count and the stages between share the
// rest evenly (megatron/core/transformer/transformer_block.py get_num_layers_to_build, l.103-146), which must
// divide (l.130-133) and which the account-for-* flags may not join (l.108-112). The split is stated.
void megatron_reader::read_uneven_split(std::optional<std::int64_t> first, std::optional<std::int64_t> last,
                                        bool accounted) {
  const char* f = first ? "--decoder-first-pipeline-num-layers" : "--decoder-last-pipeline-num-layers";
  if (accounted)
    throw bad_input(
        f,
        "cannot be combined with --account-for-embedding/loss-in-pipeline-split (Megatron asserts it, "
        "transformer_block.py l.108-112): keep one of the two");
  const std::int64_t pp = m_out.pp.value_or(1), layers = m_out.model->layers;
  const std::int64_t left = pp - int{first.has_value()} - int{last.has_value()};
  const std::int64_t rest = layers - first.value_or(0) - last.value_or(0);
  if (rest < 0 || (left > 0 && rest % left != 0) || (left <= 0 && rest != 0))
    throw bad_input(
        f, "leaves " + str_of(rest) + " of " + str_of(layers) + " layers for the " +
               str_of(std::max<std::int64_t>(left, 0)) +
               " stages between, which must share them evenly (transformer_block.py l.130-133): change "
               "the first/last counts");
  std::string shown;
  for (std::int64_t k = 0; k < pp && k < 16; ++k) {
    const std::int64_t n = k == 0 && first       ? *first
                           : k == pp - 1 && last ? *last
                                                 : rest / std::max<std::int64_t>(left, 1);
    shown += (k ? "/" : "") + str_of(n);
  }
  derive("split.layers", shown + (pp > 16 ? "/..." : ""),
         "layers per pipeline stage: the decoder-first/last counts, the rest shared evenly "
         "(transformer_block.py l.103-146)");
}

void megatron_reader::read_split() {
  const int chosen =
      int{has("--pipeline-model-parallel-layout")} + int{has("--num-layers-per-virtual-pipeline-stage")} +
      int{has("--num-virtual-stages-per-pipeline-rank") || has("--virtual-pipeline-model-parallel-size")};
  if (chosen > 1)
    throw bad_input("--pipeline-model-parallel-layout",
                    "give at most one of the layout, "
                    "--num-layers-per-virtual-pipeline-stage and "
                    "--num-virtual-stages-per-pipeline-rank (l.927-940)");
  const auto first = integer("--decoder-first-pipeline-num-layers", 0, 100'000);
  const auto last = integer("--decoder-last-pipeline-num-layers", 0, 100'000);
  const bool emb = has("--account-for-embedding-in-pipeline-split"),
             loss = has("--account-for-loss-in-pipeline-split");
  for (const char* f : {"--pipeline-model-parallel-layout", "--num-layers-per-virtual-pipeline-stage"})
    if (has(f)) m_out.vpp_flag = f;
  if (const auto s = str("--pipeline-model-parallel-layout")) {
    if (first || last || emb || loss)
      throw bad_input("--pipeline-model-parallel-layout",
                      "cannot be combined with the decoder-first/last or "
                      "account-for-* split flags");
    return read_layout(unquoted(*s));
  }
  if (first || last || emb || loss)
    m_out.split = pipeline_split{{}, first.value_or(0), last.value_or(0), emb, loss};
  m_out.needs_even_split = !first && !last;  // the CLI checks it against the pp it plans
  if ((first || last) && m_out.model && m_out.pp) read_uneven_split(first, last, emb || loss);
  if (const auto v = integer("--num-virtual-stages-per-pipeline-rank", 1, 1000))
    m_out.vpp = static_cast<int>(*v);
  if (const auto v = integer("--virtual-pipeline-model-parallel-size", 1, 1000))
    m_out.vpp = static_cast<int>(*v);
  if (const auto per = integer("--num-layers-per-virtual-pipeline-stage", 1, 100'000); per && m_out.model) {
    if (first || last)
      throw bad_input("--num-layers-per-virtual-pipeline-stage",
                      "cannot be combined with decoder-first/last "
                      "(use --num-virtual-stages-per-pipeline-rank; l.954-956)");
    const std::int64_t pp = m_out.pp.value_or(1), layers = m_out.model->layers + int{emb} + int{loss};
    if (layers % pp != 0 || (layers / pp) % *per != 0)
      throw bad_input("--num-layers-per-virtual-pipeline-stage",
                      str_of(*per) + " does not divide the " + str_of(layers) + " layers' share of each of " +
                          str_of(pp) + " stages (l.957-975)");
    m_out.vpp = static_cast<int>(layers / pp / *per);
    derive("vpp", str_of(*m_out.vpp),
           "(layers" + std::string(emb ? " + embedding" : "") + (loss ? " + loss" : "") +
               ") / pp / --num-layers-per-virtual-pipeline-stage (l.957-975)");
  }
}

void megatron_reader::read_precision() {
  const bool bf16 = has("--bf16"), fp16 = has("--fp16");
  if (bf16 && fp16) throw bad_input("--fp16", "contradicts --bf16");
  const bool fsdp = has("--use-megatron-fsdp");
  if (fsdp)
    unmodelled("--use-megatron-fsdp",
               "Megatron FSDP (" + str("--data-parallel-sharding-strategy").value_or("optim_grads_params") +
                   ") priced as the distributed optimizer");
  if (integer("--num-distributed-optimizer-instances", 1, 1'000'000).value_or(1) > 1)
    unmodelled("--num-distributed-optimizer-instances",
               "optimizer states sharded over dp / instances; priced over dp");
  if (has("--use-distributed-optimizer") || fsdp) {
    m_out.recipe = "megatron-distopt", m_out.zero = 1;
    derive("recipe", "megatron-distopt",
           "--use-distributed-optimizer: bf16 parameters, fp32 main gradients, sharded "
           "fp32 master and Adam states (6 + 12/d bytes); ZeRO stage 1");
    if (!bf16 && !fp16)
      unmodelled("--use-distributed-optimizer", "fp32 parameters: priced with bf16 parameters");
    if (has("--grad-reduce-in-bf16") && bf16 && !has("--fp8-format")) {
      m_out.recipe = "megatron-distopt-bf16-grads";
      derive("recipe", "megatron-distopt-bf16-grads",
             "--grad-reduce-in-bf16 with the distributed optimizer: a bf16 grad buffer (2 bytes, unsharded) and "
             "the fp32 cast of each rank's shard for the step (4 + 16/d bytes)");
    } else if (has("--grad-reduce-in-bf16") && !bf16) {
      unmodelled("--grad-reduce-in-bf16", "bf16 main gradients without --bf16; priced fp32");
    }  // with --bf16 and FP8: the FP8 recipe's -bf16-grads form, below
  } else {
    m_out.zero = 0;
    // bf16 accumulates and all-reduces gradients in fp32 unless --grad-reduce-in-bf16 (l.1205-1216).
    const char* r = bf16 ? (has("--grad-reduce-in-bf16") ? "bf16-adam" : "bf16-adam-fp32-grads")
                    : fp16
                        ? (has("--accumulate-allreduce-grads-in-fp32") ? "bf16-adam-fp32-grads" : "fp16-adam")
                        : "fp32-adam";
    m_out.recipe = r;
    derive("recipe", r,
           std::string(bf16   ? "--bf16"
                       : fp16 ? "--fp16"
                              : "neither --bf16 nor --fp16") +
               " without --use-distributed-optimizer: Megatron DDP, ZeRO stage 0");
  }
  if (const auto fmt = choice("--fp8-format", {"e4m3", "hybrid"})) {
    const auto r =
        choice("--fp8-recipe", {"tensorwise", "delayed", "mxfp8", "blockwise", "custom"}).value_or("delayed");
    if (r == "custom")
      unmodelled("--fp8-recipe", "custom FP8 recipe; priced without FP8");
    else
      m_out.fp8 = r == "tensorwise" ? "current" : r;
    derive("fp8", r,
           "--fp8-format " + *fmt + ", recipe " + r + (has("--fp8-recipe") ? "" : " (the default)"));
  } else if (has("--fp8-recipe")) {
    derive("fp8", "off", "--fp8-recipe without --fp8-format enables nothing");
  }
  // FP8 has its recipes (planner/recipe.cpp) under the distributed optimizer and under DDP with fp32 main
  // gradients (bf16-adam-fp32-grads: --bf16, or --fp16 with --accumulate-allreduce-grads-in-fp32); elsewhere
  // (bf16 main gradients, fp32 parameters) it stays refused.
  if (has("--fp8-param-gather") && !has("--use-distributed-optimizer") && !fsdp && !has("--use-torch-fsdp2"))
    throw bad_input("--fp8-param-gather", "needs --use-distributed-optimizer (or FSDP): Megatron refuses it "
                                          "without (megatron/training/arguments.py l.1095-1097)");
  if (!m_out.fp8 && bf16 && has("--grad-reduce-in-bf16") && m_out.recipe == std::string("megatron-distopt")) {
    // --fp8-format with a custom recipe (priced without FP8, listed above): the gradients are still bf16.
    m_out.recipe = "megatron-distopt-bf16-grads";
    derive("recipe", "megatron-distopt-bf16-grads",
           "--grad-reduce-in-bf16 with the distributed optimizer (FP8 not priced): a bf16 grad buffer and the "
           "fp32 cast of each rank's shard (4 + 16/d bytes)");
  } else if (m_out.fp8 && m_out.recipe == std::string("bf16-adam-fp32-grads")) {
    m_out.recipe = "megatron-fp8";
    derive("recipe", "megatron-fp8",
           "FP8 without the distributed optimizer: Megatron DDP, nothing sharded; bf16 weights, fp32 main "
           "gradients, master and Adam state, and a cached FP8 copy and transpose of each linear weight");
  } else if (m_out.fp8 && m_out.recipe == std::string("megatron-distopt")) {
    const bool gather = has("--fp8-param-gather"), bf16_grads = has("--grad-reduce-in-bf16") && bf16;
    m_out.recipe = std::string(gather ? "megatron-distopt-fp8-param-gather" : "megatron-distopt-fp8") +
                   (bf16_grads ? "-bf16-grads" : "");
    derive("recipe", *m_out.recipe,
           std::string(gather ? "FP8 with --fp8-param-gather: FP8 primary weights cast from the fp32 master, no bf16 "
                                "copy of the linear weights"
                              : "FP8 with the distributed optimizer: the bf16 weights stay and each linear weight "
                                "gains an FP8 copy and transpose") +
               (bf16_grads ? "; --grad-reduce-in-bf16: a bf16 grad buffer and the fp32 cast of each rank's shard"
                           : ""));
  } else if (m_out.fp8 && has("--grad-reduce-in-bf16") && m_out.recipe == std::string("bf16-adam")) {
    // DDP reduces in bf16 and the step takes an fp32 copy of every gradient (optimizer.py l.1097): no recipe.
    unmodelled("--grad-reduce-in-bf16", "bf16 main gradients with FP8 under DDP; no FP8 recipe prices them");
  } else if (has("--fp8-param-gather")) {
    unmodelled("--fp8-param-gather", m_out.fp8 ? "FP8 primary weights with this precision; not modelled"
                                                : "without --fp8-format (or with a custom recipe)");
  }
  read_optimizer_dtypes();
  if (has("--optimizer-cpu-offload")) {
    m_out.offload_optimizer = true;
    if (number("--optimizer-offload-fraction").value_or(1.0) < 1.0)
      unmodelled("--optimizer-offload-fraction",
                 "part of the optimizer stays on the GPU; priced as all offloaded");
  }
}

// Runs after the FP8 recipe is chosen (read_precision), since where the master weights live depends on it.
void megatron_reader::read_optimizer_dtypes() {
  struct dtype_flag {
    const char* flag;
    const char* what;
  };
  static constexpr dtype_flag flags[] = {{"--exp-avg-dtype", "Adam first moment"},
                                         {"--exp-avg-sq-dtype", "Adam second moment"},
                                         {"--main-grads-dtype", "main gradients"},
                                         {"--main-params-dtype", "master weights"}};
  const auto avg = choice("--exp-avg-dtype", {"fp32", "fp16", "bf16", "fp8"});
  const auto avg_sq = choice("--exp-avg-sq-dtype", {"fp32", "fp16", "bf16", "fp8"});
  const auto grads = choice("--main-grads-dtype", {"fp32", "fp16", "bf16", "fp8"}).value_or("fp32");
  const auto params = choice("--main-params-dtype", {"fp32", "fp16", "bf16", "fp8"}).value_or("fp32");
  const bool aware = has("--use-precision-aware-optimizer");
  for (const auto& d : flags)
    if (!aware && choice(d.flag, {"fp32", "fp16", "bf16", "fp8"}).value_or("fp32") != "fp32")
      throw bad_input(d.flag, "needs --use-precision-aware-optimizer: Megatron asserts fp32 without it "
                              "(megatron/core/optimizer/optimizer_config.py l.468-479)");
  // Both Adam moments in bf16 with fp32 master weights and main gradients under the distributed optimizer:
  // without FP8, megatron-distopt-bf16-moments; with FP8 other than delayed scaling, the FP8 recipe's
  // -bf16-moments form (planner/recipe.cpp: MCore keeps the fp32 master shard, optimizer_config.py l.407-414).
  // Delayed scaling hands the master weights to TransformerEngine's FusedAdam (optimizer/__init__.py
  // l.571-585): not modelled. Any other mix stays unmodelled.
  const std::string r = m_out.recipe.value_or("");
  if (avg == "bf16" && avg_sq == "bf16" && grads == "fp32" && params == "fp32") {
    if (r == "megatron-distopt" && !has("--fp8-format")) {
      m_out.recipe = "megatron-distopt-bf16-moments";
      derive("recipe", *m_out.recipe,
             "--use-precision-aware-optimizer with --exp-avg-dtype bf16 --exp-avg-sq-dtype bf16: Adam's moments in "
             "bf16");
      return;
    }
    if (m_out.fp8 && *m_out.fp8 != "delayed" &&
        (r == "megatron-distopt-fp8" || r == "megatron-distopt-fp8-param-gather")) {
      m_out.recipe = r + "-bf16-moments";
      derive("recipe", *m_out.recipe,
             "FP8 (" + *m_out.fp8 + ") with --use-precision-aware-optimizer --exp-avg-dtype bf16 --exp-avg-sq-dtype "
             "bf16: Adam's moments in bf16, MCore's fp32 master shard (optimizer_config.py l.407-414)");
      return;
    }
    if (m_out.fp8 && *m_out.fp8 == "delayed") {
      unmodelled("--use-precision-aware-optimizer",
                 "with delayed FP8 scaling TransformerEngine's FusedAdam holds the master weights "
                 "(optimizer/__init__.py l.571-585); not modelled");
      return;
    }
  }
  bool changed = false;
  for (const auto& d : flags) {
    const auto v = choice(d.flag, {"fp32", "fp16", "bf16", "fp8"});
    if (!v || *v == "fp32") continue;
    changed = true;
    unmodelled(d.flag, std::string(d.what) + " in " + *v + " (precision-aware optimizer); priced fp32");
  }
  if (aware && !changed) m_out.unused.push_back("--use-precision-aware-optimizer");
}

void megatron_reader::read_recompute() {
  auto gran = choice("--recompute-granularity", {"full", "selective"});
  if (!gran && has("--recompute-activations")) {
    gran = "selective";
    derive("recompute", "selective", "--recompute-activations sets --recompute-granularity selective");
  }
  if (!gran) {
    m_out.recompute = recompute_mode::none;
    if (has("--recompute-modules")) derive("recompute_modules", "ignored", "no --recompute-granularity");
    return;
  }
  if (*gran == "full") {
    m_out.recompute = recompute_mode::full;
    const auto method = choice("--recompute-method", {"uniform", "block"});
    const auto n = integer("--recompute-num-layers", 1, 100'000);
    if (method == "block")
      unmodelled("--recompute-method", "block: only " + str_of(n.value_or(1)) +
                                           " layers per stage recomputed; priced as all recomputed");
    else if (n && *n > 1)
      unmodelled("--recompute-num-layers",
                 "uniform groups of " + str_of(*n) + " layers; priced as one layer each");
    return;
  }
  m_out.recompute = recompute_mode::selective;
  std::vector<std::string> mods;
  if (const auto it = m_flags.find("--recompute-modules"); it != m_flags.end()) {
    for (const auto& w : it->second) {
      if (!w.unresolved.empty()) (void)word("--recompute-modules");
      mods.push_back(w.text);
    }
  } else {
    mods = {"core_attn"};
    derive("recompute_modules", "core_attn",
           "the default of --recompute-modules (transformer_config.py l.1940-1941)");
  }
  // The modules headroom models (transformer_config.py l.560-580); Megatron's others are for other layers.
  static const std::vector<std::string> known{"core_attn", "moe_act", "layernorm",     "mla_up_proj",
                                              "mlp",       "moe",     "shared_experts"};
  for (const auto& mod : mods) {
    if (std::find(known.begin(), known.end(), mod) != known.end())
      m_out.recompute_modules.push_back(mod);
    else
      unmodelled("--recompute-modules",
                 "module '" + printable(mod, 40) + "' is not modelled; priced as kept");
  }
}

void megatron_reader::read_world() {
  std::optional<std::int64_t> per_node, nodes;
  const auto& l = m_text.launcher;
  const auto parse = [](const std::string& s) -> std::optional<std::int64_t> {
    if (s.empty() || s.size() > 7 || s.find_first_not_of("0123456789") != std::string::npos)
      return std::nullopt;
    return std::stoll(s);
  };
  for (std::size_t i = 0; i < l.size(); ++i) {
    const std::string& w = l[i].text;
    const std::size_t eq = w.find('=');
    const std::string name = w.substr(0, eq);
    const std::string value = eq != std::string::npos ? w.substr(eq + 1)
                              : i + 1 < l.size()      ? l[i + 1].text
                                                      : "";
    if (name == "--nproc_per_node" || name == "--nproc-per-node") per_node = parse(value);
    if (name == "--nnodes") nodes = parse(value);
  }
  std::string why = "torchrun --nproc_per_node x --nnodes";
  const auto var = [&](const char* n) -> std::optional<std::int64_t> {
    const auto it = m_text.variables.find(n);
    return it == m_text.variables.end() || !it->second.unresolved.empty() ? std::nullopt
                                                                          : parse(it->second.text);
  };
  std::optional<std::int64_t> world = per_node && nodes ? std::optional(*per_node * *nodes) : std::nullopt;
  if (!world && (world = var("WORLD_SIZE"))) why = "WORLD_SIZE";
  const auto n = var("NNODES") ? var("NNODES") : var("NUM_NODES");
  if (!world && var("GPUS_PER_NODE") && n) world = *var("GPUS_PER_NODE") * *n, why = "GPUS_PER_NODE x NNODES";
  if (!world) return;
  const std::int64_t grid = std::int64_t{m_out.tp.value_or(1)} * m_out.pp.value_or(1) * m_out.cp.value_or(1);
  if (*world < 1 || *world > max_gpus || *world % grid != 0) {
    derive("gpus", "not set",
           why + " gives " + str_of(*world) + " GPUs, not a multiple of tp x pp x cp = " + str_of(grid) +
               ": the script's node count is a placeholder");
    return;
  }
  m_out.gpus = static_cast<int>(*world);
  m_out.dp = static_cast<int>(*world / grid);
  derive("gpus", str_of(*world), why);
  if (m_out.global_batch && *m_out.global_batch % (m_out.micro_batch.value_or(1) * *m_out.dp) != 0)
    throw bad_input("--global-batch-size", str_of(*m_out.global_batch) +
                                               " is not a multiple of micro-batch x dp = " +
                                               str_of(m_out.micro_batch.value_or(1) * *m_out.dp) +
                                               ", as Megatron requires (num_microbatches_calculator.py "
                                               "l.367-393): make it a multiple of that");
}

}  // namespace headroom::detail
