// megatron_args.cpp: the Megatron-LM launch importer (megatron_args.hpp). The launch text becomes argument
// words (megatron_text.cpp), the words become flags (classified by megatron_flags.cpp), and the readers
// below fill a launch_import, applying Megatron's defaults where a flag is absent. Sources are
// NVIDIA/Megatron-LM @ d98e8a64 unless named otherwise.
#include "planner/imports/megatron_args.hpp"

#include <cctype>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <set>

#include "planner/errors.hpp"
#include "planner/format.hpp"
#include "planner/imports/config_file.hpp"
#include "planner/imports/megatron_args_detail.hpp"
#include "planner/imports/megatron_flags.hpp"
#include "planner/imports/megatron_text.hpp"
#include "planner/json_fields.hpp"
#include "planner/model_files.hpp"

namespace headroom {
namespace detail {

megatron_reader::megatron_reader(const launch_text& t, const std::string& origin)
    : m_text(t), m_origin(origin) {
  m_out.origin = origin;
  m_out.change_hint = "by appending the flag to --megatron-args (the last of a flag wins, as in Megatron)";
  std::string current;
  for (const auto& w : t.args) {
    if (w.text.starts_with("--") && w.text.size() > 2) {
      const std::size_t eq = w.text.find('=');
      current = w.text.substr(0, eq);
      m_flags[current] = {};  // argparse: the last occurrence wins
      if (eq != std::string::npos) m_flags[current].push_back({w.text.substr(eq + 1), w.unresolved});
    } else if (!current.empty()) {
      m_flags[current].push_back(w);
    } else {
      m_out.unmodelled.push_back(printable(w.text, 60) + ": a word before the first flag; not read");
    }
  }
  for (const auto& n : t.notes) derive("script", "note", n);
}

void megatron_reader::classify() {
  for (const auto& entry : m_flags) {
    const std::string& name = entry.first;
    const std::vector<shell_word>& values = entry.second;
    const megatron_flag* f = find_megatron_flag(name);
    if (!f) {
      // Megatron's parser refuses a flag it does not define (arguments.py parse_args, l.117-132: argparse with
      // allow_abbrev=False). One near a known flag is a typo: planned on, the setting would silently keep its
      // default. One far from all is listed, as it may be a flag of a later Megatron.
      const std::string near = closest_name(name, megatron_flag_names());
      if (!near.empty() && name.size() > 2 && is_near_miss(name.substr(2), near.substr(2)))
        throw bad_input(printable(name, 80), "unknown flag (did you mean '" + near +
                                  "'?): correct its spelling (Megatron's parse_args refuses it too)");
      m_out.unmodelled.push_back(printable(name, 80) + ": unknown flag, may change memory");
      continue;
    }
    if (f->role == flag_role::unused) m_out.unused.push_back(name);
    if (f->role == flag_role::unmodelled) m_out.unmodelled.push_back(name + ": " + f->why);
    if (f->role != flag_role::read) continue;
    const auto shown = [&] {
      std::string s;
      for (const auto& v : values) s += (s.empty() ? "'" : ", '") + printable(v.text, 40) + "'";
      return s;
    };
    if (f->arity == flag_arity::none && values.size() == 1 && m_text.yaml) {  // `--sequence-parallel: ture`
      if (!values[0].unresolved.empty()) word(name.c_str());  // ModelZoo's ${MOE_GROUPED_GEMM}: names the variable
      const std::string near = closest_name(values[0].text, {"true", "false"});
      throw bad_input(name, "is a switch: write true or false in the YAML, got '" +
                                printable(values[0].text, 40) + "'" +
                                (near.empty() ? "" : " (did you mean '" + near + "'?)"));
    }
    if (f->arity == flag_arity::none && !values.empty())
      throw bad_input(name, "takes no value, got " + shown() + ": remove the value");
    if (f->arity != flag_arity::none && values.empty()) throw bad_input(name, "is missing its value");
    if (f->arity == flag_arity::one && values.size() > 1)
      throw bad_input(name, "takes one value, got " + std::to_string(values.size()) + ": " + shown());
  }
}

bool megatron_reader::has(const char* f) const {
  return m_flags.count(f) > 0;
}

const shell_word* megatron_reader::word(const char* f) const {
  const auto it = m_flags.find(f);
  if (it == m_flags.end() || it->second.empty()) return nullptr;
  const shell_word& w = it->second[0];
  if (!w.unresolved.empty()) {
    const std::string& v = w.unresolved[0];
    const bool name = !v.empty() && (std::isalpha(static_cast<unsigned char>(v[0])) || v[0] == '_');
    throw bad_input(
        f, "its value '" + printable(w.text, 60) + "' refers to " + (v.starts_with("$") ? v : "$" + v) +
               ", which nothing in the text sets" +
               (name ? ": --megatron-var " + printable(v, 40) + "=VALUE sets it"
                     : ": write the value in the launch (headroom runs no command and takes no script "
                       "arguments)"));
  }
  return &w;
}

std::optional<std::string> megatron_reader::str(const char* f) const {
  const shell_word* w = word(f);
  if (!w) return std::nullopt;
  return w->text;
}

std::optional<std::int64_t> megatron_reader::integer(const char* f, std::int64_t lo, std::int64_t hi) const {
  const auto s = str(f);
  if (!s) return std::nullopt;
  std::int64_t v = 0;
  const auto r = std::from_chars(s->data(), s->data() + s->size(), v);
  if (r.ec == std::errc::result_out_of_range)
    throw bad_input(f, "'" + printable(*s, 40) + "' is out of range");
  if (r.ec != std::errc() || r.ptr != s->data() + s->size())
    throw bad_input(f, "needs an integer, got '" + printable(*s, 40) + "'");
  if (v < lo || v > hi)
    throw bad_input(f, std::to_string(v) + " is outside " + std::to_string(lo) + ".." + std::to_string(hi) +
                           ": write a value in that range");
  return v;
}

std::optional<double> megatron_reader::number(const char* f) const {
  const auto s = str(f);
  if (!s) return std::nullopt;
  double v = 0;
  const auto r = std::from_chars(s->data(), s->data() + s->size(), v);
  if (r.ec != std::errc() || r.ptr != s->data() + s->size() || !std::isfinite(v) || v < 0)
    throw bad_input(f, "needs a non-negative number, got '" + printable(*s, 40) + "'");
  return v;
}

std::optional<std::string> megatron_reader::choice(const char* f,
                                                   std::initializer_list<const char*> names) const {
  const auto s = str(f);
  if (!s) return std::nullopt;
  std::string all;
  std::vector<std::string> known;
  for (const char* n : names) {
    if (*s == n) return s;
    all += (all.empty() ? "" : ", ") + std::string(n);
    known.emplace_back(n);
  }
  // argparse's `choices` (the flag's Literal type in transformer_config.py): any other value is refused.
  const std::string near = closest_name(*s, known);
  throw bad_input(f, "'" + printable(*s, 40) + "' is not one of " + all +
                         (near.empty() ? "" : " (did you mean '" + near + "'?)"));
}

void megatron_reader::derive(const std::string& field, const std::string& value, const std::string& why) {
  m_out.derived.push_back({field, value, why});
}

void megatron_reader::unmodelled(const std::string& flag, const std::string& why) {
  m_out.unmodelled.push_back(flag + ": " + why);
}

launch_import megatron_reader::run() {
  // Every refusal names the launch it came from: the file, or "megatron arguments" for a string.
  try {
    return read_all();
  } catch (const bad_input& e) {
    const std::string shown = shown_name(m_origin);
    if (e.field().starts_with(shown)) throw;
    throw bad_input(shown + ": " + e.field(), e.problem());
  }
}

launch_import megatron_reader::read_all() {
  classify();
  read_parallel();
  read_loss();
  read_model();
  read_fusions();
  read_split();
  read_precision();
  read_recompute();
  read_world();
  check_consistency();
  // The allocator's settings the launch exports (ModelZoo's ENV_VARS: expandable_segments:True): the plan
  // states them, and its allocator emulation runs under them.
  if (const auto it = m_text.variables.find("PYTORCH_CUDA_ALLOC_CONF");
      it != m_text.variables.end() && it->second.unresolved.empty() && !it->second.text.empty()) {
    m_out.alloc_conf = it->second.text;
    derive(
        "PYTORCH_CUDA_ALLOC_CONF", printable(it->second.text, 80),
        m_text.env_vars.count("PYTORCH_CUDA_ALLOC_CONF") ? "the YAML's ENV_VARS" : "set by the launch text");
  }
  read_workspaces();
  return std::move(m_out);
}

void megatron_reader::read_parallel() {
  constexpr std::int64_t big = 1'000'000;
  auto set = [&](std::optional<int>& field, const char* f) {
    if (const auto v = integer(f, 1, big)) field = static_cast<int>(*v);
  };
  set(m_out.tp, "--tensor-model-parallel-size");
  set(m_out.pp, "--pipeline-model-parallel-size");
  set(m_out.cp, "--context-parallel-size");
  set(m_out.ep, "--expert-model-parallel-size");
  set(m_out.etp, "--expert-tensor-parallel-size");
  if (!m_out.etp && m_out.tp && has("--num-experts")) {
    m_out.etp = m_out.tp;
    derive("etp", std::to_string(*m_out.tp),
           "expert TP = TP when --expert-tensor-parallel-size is absent "
           "(transformer_config.py l.587-588)");
  }
  m_out.sequence_parallel = has("--sequence-parallel");
  if (!has("--sequence-parallel"))
    derive("sequence_parallel", "false", "--sequence-parallel absent: Megatron runs without it");
  m_out.micro_batch = integer("--micro-batch-size", 1, big);
  m_out.global_batch = integer("--global-batch-size", 1, std::int64_t{1} << 40);
  m_out.seq = integer("--seq-length", 1, std::int64_t{1} << 30);
  if (m_out.seq && m_out.cp && *m_out.cp > 1 && *m_out.seq % (2 * *m_out.cp) != 0)
    throw bad_input("--seq-length", std::to_string(*m_out.seq) +
                                        " is not a multiple of 2 x --context-parallel-size " +
                                        "(arguments.py l.1335-1338)");
  if (const auto backend = str("--attention-backend")) {
    const bool eager = *backend == "unfused" || *backend == "local";
    m_out.attention = eager ? attention_kind::eager : attention_kind::flash;
    derive("attention", eager ? "eager" : "flash", "--attention-backend " + printable(*backend, 20));
  } else if (has("--use-flash-attn")) {
    m_out.attention = attention_kind::flash;
    derive("attention", "flash", "--use-flash-attn");
  } else {
    // Megatron's --attention-backend defaults to auto (megatron/training/arguments.py): TransformerEngine's
    // flash or fused kernel, neither keeping the s x s scores; the local implementation's core is unfused.
    const bool local = str("--transformer-impl") == std::optional<std::string>("local");
    m_out.attention = local ? attention_kind::eager : attention_kind::flash;
    derive("attention", local ? "eager" : "flash",
           local ? "--transformer-impl local: the unfused attention core"
                 : "--attention-backend absent: Megatron's default auto runs TransformerEngine's fused kernels");
  }
}

// The loss as compute_language_model_loss runs it (megatron/core/models/common/language_module/
// language_module.py l.161-205 at d98e8a64): the vocab-parallel cross-entropy, compiled under
// --cross-entropy-loss-fusion with its default native implementation, TransformerEngine's kernel with te.
void megatron_reader::read_loss() {
  const auto impl = choice("--cross-entropy-fusion-impl", {"native", "te"});
  if (!has("--cross-entropy-loss-fusion")) {
    m_out.loss = loss_kind::fused;  // tensor_parallel.vocab_parallel_cross_entropy, the planner's default
  } else if (impl.value_or("native") == "native") {
    m_out.loss = loss_kind::compiled;
    derive("loss", "compiled",
           "--cross-entropy-loss-fusion" +
               std::string(impl ? " with --cross-entropy-fusion-impl native" : "") +
               ": fused_vocab_parallel_cross_entropy under torch.compile, 10 bytes per logit");
  } else {
    // TransformerEngine's parallel_cross_entropy keeps the bf16 logits and, since TE 01bbe3e (2026-07), an fp32
    // gradient (transformer_engine/pytorch/triton/cross_entropy.py): 6 bytes per logit, as the unfused path.
    // Earlier TE wrote the gradient into the logits in place, so this prices at most 4 bytes per logit high.
    m_out.loss = loss_kind::fused;
    derive("loss", "fused",
           "--cross-entropy-fusion-impl te: TransformerEngine's kernel keeps the bf16 logits and an fp32 "
           "gradient, 6 bytes per logit");
  }
}

// Megatron's fusions the launch turns off (arguments.py l.2887-2905: each --no-*-fusion stores False into a
// fusion that defaults on) whose unfused code path keeps other tensors for backward (model_spec::unfused; the
// ledger's entries in docs/model.md, "Megatron's unfused paths"; measured by tests/megatron_unfused_saved_test.py).
void megatron_reader::read_fusions() {
  const bool rope_off = has("--no-rope-fusion"), swiglu_off = has("--no-bias-swiglu-fusion");
  const bool softmax_off = has("--no-masked-softmax-fusion");
  if (!m_out.model) {
    for (const char* f : {"--no-rope-fusion", "--no-bias-swiglu-fusion", "--no-masked-softmax-fusion"})
      if (has(f))
        unmodelled(f, "the launch states no model, so its unfused path is not carried to --preset's");
    return;
  }
  model_spec& m = *m_out.model;
  auto mark = [&](unfused_path p, const std::string& why) {
    m.unfused |= unfused_bit(p);
    derive("unfused", name_of(p), why);
  };
  // RoPE (rope_utils.py l.340-414): with the fusion off, _apply_rotary_pos_emb_bshd (l.92-156) for standard
  // attention (attention.py l.1508-1535) and MLA (multi_latent_attention.py l.936-964).
  const std::string pos =
      str("--position-embedding-type").value_or(m.position == position_kind::rotary ? "rope" : "");
  if (rope_off && pos == "rope") {
    mark(unfused_path::rope,
         "--no-rope-fusion: unfused RoPE keeps cos and sin (s x rotary dim) for q and k per layer");
    if (const auto pct = number("--rotary-percent"); pct && *pct != 1.0 && !m.mla.enabled())
      unmodelled("--no-rope-fusion", "with --rotary-percent " + fixed(*pct, 2) +
                                         ": priced over the whole head_dim, not its rotary part");
  } else if (rope_off && m.position == position_kind::rotary) {
    unmodelled("--no-rope-fusion",
               "position type " + printable(pos, 20) + ": its unfused rotary path is not priced");
  } else if (rope_off) {
    m_out.unused.push_back("--no-rope-fusion");  // no rotary embedding: nothing to fuse
  }
  // SwiGLU (argument_utils.py l.314-317: bias_activation_fusion = bias_swiglu_fusion with --swiglu): mlp.py
  // l.318-333 and experts.py l.996-1014 run glu() eagerly.
  if (swiglu_off && m.mlp == mlp_kind::swiglu)
    mark(unfused_path::swiglu,
         "--no-bias-swiglu-fusion: glu() keeps silu(gate) and up + offset (and the routed experts' product)");
  else if (swiglu_off)
    m_out.unused.push_back("--no-bias-swiglu-fusion");  // a GeLU MLP: the flag sets nothing it reads
  // The softmax: only Megatron's DotProductAttention (the local spec) reads masked_softmax_fusion and
  // attention_softmax_in_fp32 (dot_product_attention.py l.100-108); TransformerEngine's attention, the unfused
  // one included (NVTE_UNFUSED_ATTN, language_module.py l.128-148), reads neither. Off, fused_softmax.py
  // forward_torch_softmax (l.300-335) runs in fp32 under --attention-softmax-in-fp32 or
  // --apply-query-key-layer-scaling (arguments.py l.1714-1715) and makes its causal mask when the batch brings
  // none (--no-create-attention-mask-in-dataloader; transformer/utils.py l.38-40).
  const bool local_core = str("--transformer-impl") == std::optional<std::string>("local") &&
                          m_out.attention == attention_kind::eager;
  const bool half = has("--bf16") || has("--fp16");
  const bool fp32 = has("--attention-softmax-in-fp32") || has("--apply-query-key-layer-scaling");
  if (softmax_off && local_core && fp32 && half)
    mark(unfused_path::softmax_fp32,
         "--no-masked-softmax-fusion: PyTorch's softmax in fp32 keeps fp32 probabilities");
  if (softmax_off && local_core && has("--no-create-attention-mask-in-dataloader"))
    mark(unfused_path::softmax_mask,
         "--no-masked-softmax-fusion: PyTorch's softmax makes an s x s causal mask per layer (no mask from "
         "the dataloader)");
  // Read, and without effect on this launch's tensors: listed as unused.
  const bool torch_softmax = softmax_off && local_core;
  for (const auto& [flag, used] : {std::pair{"--no-masked-softmax-fusion", torch_softmax},
                                   std::pair{"--attention-softmax-in-fp32", torch_softmax && half},
                                   std::pair{"--apply-query-key-layer-scaling", torch_softmax && half},
                                   std::pair{"--no-create-attention-mask-in-dataloader", torch_softmax}})
    if (has(flag) && !used) m_out.unused.push_back(flag);
}

// Returns the tokenizer's vocabulary before padding, from the tokenizers whose size is public, or nullopt.
std::optional<std::int64_t> megatron_reader::known_vocab(std::string* why) const {
  std::optional<std::string> type = has("--tokenizer-type") ? str("--tokenizer-type") : std::nullopt;
  if (!type && has("--vocab-file") && has("--merge-file"))
    type = "GPT2BPETokenizer";  // GPT-3 example's files
  if (!type) return std::nullopt;
  *why = "tokenizer " + *type;
  if (*type == "GPT2BPETokenizer")
    return 50257;  // GPT-2's BPE: 50,257 tokens (HF gpt2 config.json vocab_size)
  if (*type == "Llama2Tokenizer") return 32000;  // Llama 2 / Mistral SentencePiece: 32,000 pieces
  if (*type != "HuggingFaceTokenizer" || !has("--tokenizer-model")) return std::nullopt;
  const shell_word* w =
      m_flags.at("--tokenizer-model").empty() ? nullptr : &m_flags.at("--tokenizer-model")[0];
  if (!w || !w->unresolved.empty()) return std::nullopt;
  // The released checkpoints' config.json vocab_size, which ModelZoo's --make-vocab-size-divisible-by
  // (3232, 1187) reproduces exactly (reference notes, section 2 and 3a).
  static const std::map<std::string, std::int64_t> hf{
      {"deepseek-ai/DeepSeek-V3", 129280},      {"unsloth/DeepSeek-V3", 129280},
      {"deepseek-ai/DeepSeek-V3-Base", 129280}, {"Qwen/Qwen3-235B-A22B", 151936},
      {"Qwen/Qwen3-30B-A3B", 151936},           {"mistralai/Mixtral-8x7B-v0.1", 32000}};
  const auto it = hf.find(w->text);
  if (it == hf.end()) return std::nullopt;
  *why = "vocab_size of " + w->text + "'s config.json";
  return it->second;
}

std::int64_t megatron_reader::read_vocab() {
  if (const auto padded = integer("--padded-vocab-size", 1, 100'000'000)) {
    derive("vocab", std::to_string(*padded), "--padded-vocab-size");
    return *padded;
  }
  std::string why = "--vocab-size";
  std::optional<std::int64_t> v = integer("--vocab-size", 1, 100'000'000);
  if (!v) v = known_vocab(&why);
  if (!v) {
    // The fix is in the launch's own flags (pretrain_gpt.py's, not headroom's), or in the variable that names
    // the tokenizer when the launch leaves it to its runner (ModelZoo's --tokenizer-model: ${TOKENIZER_MODEL}).
    const auto tm = m_flags.find("--tokenizer-model");
    if (tm != m_flags.end() && !tm->second.empty() && !tm->second[0].unresolved.empty()) {
      const std::string var = printable(tm->second[0].unresolved[0], 30);
      throw bad_input("--vocab-size", "not stated, and --tokenizer-model is $" + var +
                                          ", which nothing sets: --megatron-var " + var +
                                          "=deepseek-ai/DeepSeek-V3 (or another tokenizer of known size), or "
                                          "add --vocab-size N to the Megatron arguments");
    }
    throw bad_input(
        "--vocab-size",
        "not stated, and headroom does not know the size of the tokenizer: add --vocab-size N or "
        "--padded-vocab-size N to the Megatron arguments (pretrain_gpt.py's flags, not headroom's)");
  }
  const std::int64_t div = integer("--make-vocab-size-divisible-by", 1, 1'000'000).value_or(128);
  const std::int64_t multiple = div * m_out.tp.value_or(1);
  const std::int64_t padded = (*v + multiple - 1) / multiple * multiple;
  derive("vocab", std::to_string(padded),
         why + " " + std::to_string(*v) + " padded to a multiple of make-vocab-size-divisible-by (" +
             std::to_string(div) + ") x TP (build_tokenizer.py l.133-146)");
  return padded;
}

// The token dispatcher. Megatron's flex dispatcher (token_dispatcher.py MoEFlexTokenDispatcher, l.1809-2052)
// hands the tokens to a fused all-to-all (DeepEP, HybridEP or NCCL EP) and then permutes what arrives into
// one row per (token, local expert): the same R routed rows, experts' input and unpermute input as the
// alltoall dispatcher, which is how the planner prices it. DeepEP's receive tensor (one row per (token,
// rank) pair, at most R; DeepEP csrc/legacy/buffer.hpp l.603 @ dd758ca, from the caching allocator) is
// within the alltoall's receive buffer of R rows. What it does not price are the backend's own
// communication buffers, allocated outside PyTorch's caching allocator: DeepEP's NVLink buffer (cudaMalloc
// or cuMem, shared by IPC; buffer.hpp l.134, utils/shared_memory.hpp l.52-74), its 32 MiB workspace
// (l.149) and its RDMA buffer on the NVSHMEM heap (l.268), sized by fused_a2a.py get_buffer (l.36-69);
// HybridEP's buffer (fused_a2a.py init_hybrid_ep_buffer, l.285-348); NCCL EP's symmetric buffers (l.690-694).
void megatron_reader::read_dispatcher() {
  const auto type = choice("--moe-token-dispatcher-type", {"allgather", "alltoall", "flex"});
  const auto backend = choice("--moe-flex-dispatcher-backend", {"deepep", "hybridep", "ncclep"});
  const bool deepep_flag = has("--moe-enable-deepep");
  // transformer_config.py l.1743-1768: the deprecated --moe-enable-deepep and the ncclep backend need flex.
  if (deepep_flag && type != "flex")
    throw bad_input("--moe-enable-deepep", "needs --moe-token-dispatcher-type flex (transformer_config.py l.1744-1745)");
  if (deepep_flag && backend == "hybridep")
    throw bad_input("--moe-enable-deepep", "contradicts --moe-flex-dispatcher-backend hybridep (l.1746-1747)");
  if (backend == "ncclep" && type != "flex")
    throw bad_input("--moe-flex-dispatcher-backend", "ncclep needs --moe-token-dispatcher-type flex (l.1763-1767)");
  if (type != "flex") {
    m_out.dispatcher = type.value_or("allgather");
    if (!type)
      derive("dispatcher", "allgather", "--moe-token-dispatcher-type defaults to allgather (transformer_config.py l.891)");
    if (backend) m_out.unused.push_back("--moe-flex-dispatcher-backend");
    return;
  }
  const std::string b = deepep_flag ? "deepep" : backend.value_or("deepep");
  if (b == "deepep" && m_out.pad_to_capacity)
    throw bad_input("--moe-pad-expert-input-to-capacity",
                    "is refused by Megatron with the flex dispatcher's deepep backend (transformer_config.py l.1754-1761)");
  m_out.dispatcher = "alltoall";
  derive("dispatcher", "alltoall",
         "--moe-token-dispatcher-type flex (backend " + b + (backend || deepep_flag ? "" : ", the default") +
             ") permutes after a fused all-to-all: the alltoall dispatcher's routed rows and buffers "
             "(token_dispatcher.py l.1809-2052)");
  unmodelled("--moe-token-dispatcher-type",
             "flex: the " + b + " backend's communication buffers, outside PyTorch's caching allocator"
             " (fused_a2a.py); not priced");
}

// Settings that contradict each other, refused as Megatron refuses them (sources at NVIDIA/Megatron-LM
// d98e8a64): planned on, each would be a launch that never starts, priced as if it did.
void megatron_reader::check_consistency() {
  const auto s = [](std::int64_t v) { return std::to_string(v); };
  const std::int64_t tp = m_out.tp.value_or(1);
  if (m_out.model) {
    const model_spec& m = *m_out.model;
    // transformer_config.py TransformerConfig.__post_init__ l.1446-1450.
    if (m.heads % tp != 0)
      throw bad_input("--tensor-model-parallel-size",
                      s(tp) + " does not divide --num-attention-heads " + s(m.heads) +
                          ", as Megatron requires (transformer_config.py __post_init__): use a tp dividing " +
                          s(m.heads));
    // l.1461-1468: the query groups are split over tp, or replicated over groups of tp ranks.
    if (m.kv_heads % tp != 0 && tp % m.kv_heads != 0)
      throw bad_input("--num-query-groups",
                      s(m.kv_heads) + " is neither a multiple nor a divisor of --tensor-model-parallel-size " +
                          s(tp) + ", as Megatron requires (transformer_config.py __post_init__): change one of them");
    // arguments.py validate_args l.1655-1658.
    if (m_out.ep && *m_out.ep > 1 && m.moe.experts == 0)
      throw bad_input("--expert-model-parallel-size",
                      s(*m_out.ep) + " needs --num-experts, as Megatron requires (arguments.py validate_args): "
                                     "drop it or add --num-experts N");
    // arguments.py validate_args l.1353-1356, whatever the position embedding.
    if (has("--max-position-embeddings") && m_out.seq && m.max_positions < *m_out.seq)
      throw bad_input("--max-position-embeddings",
                      s(m.max_positions) + " is below --seq-length " + s(*m_out.seq) +
                          ", which Megatron refuses (arguments.py validate_args): raise it to at least " +
                          s(*m_out.seq));
  }
  // argparse's choices hold whether or not the launch is MoE (the Literal types of transformer_config.py).
  (void)choice("--moe-token-dispatcher-type", {"allgather", "alltoall", "flex"});
  const auto gran = choice("--recompute-granularity", {"full", "selective"});
  const auto method = choice("--recompute-method", {"uniform", "block"});
  const std::string full_fix = "append --recompute-method uniform --recompute-num-layers 1";
  // transformer_config.py __post_init__ l.1901-1932 and arguments.py validate_args l.1425-1428.
  if (gran == "full" && !method)
    throw bad_input("--recompute-granularity", "full needs --recompute-method, as Megatron requires "
                                               "(transformer_config.py __post_init__): " + full_fix);
  if (gran == "full" && !has("--recompute-num-layers"))
    throw bad_input("--recompute-granularity", "full needs --recompute-num-layers, as Megatron requires "
                                               "(transformer_config.py __post_init__): " + full_fix);
  if (gran == "selective" && method)
    throw bad_input("--recompute-method", "applies to --recompute-granularity full only, as Megatron requires "
                                          "(arguments.py validate_args): drop it");
  if (gran == "selective" && has("--recompute-num-layers"))
    throw bad_input("--recompute-num-layers", "applies to --recompute-granularity full only, as Megatron requires "
                                              "(transformer_config.py __post_init__): drop it");
}

}  // namespace detail

launch_import import_megatron_args(const std::string& text, const std::string& origin,
                                   const std::map<std::string, std::string>& env) {
  const auto t = detail::read_launch_text(text, origin, env);
  return detail::megatron_reader(t, origin).run();
}

namespace {
bool is_launch_file(const std::string& s) {
  std::error_code ec;
  return !s.empty() && s.size() < 4096 && s.find('\n') == std::string::npos &&
         std::filesystem::is_regular_file(s, ec);
}
std::string read_launch_file(const std::string& path) {
  return read_regular_file(path, std::uintmax_t{4} << 20, "a Megatron launch file");
}
}  // namespace

launch_import load_megatron_args(const std::string& file_or_string,
                                 const std::map<std::string, std::string>& env) {
  // A launch read from a file names its model by the file (ModelZoo's Qwen3-30B-A3B.yaml), not "megatron".
  auto named = [](launch_import imp, const std::string& path) {
    if (imp.model)
      if (std::string name = model_name_of_file(path); !name.empty()) imp.model->name = std::move(name);
    return imp;
  };
  if (is_launch_file(file_or_string))
    return named(import_megatron_args(read_launch_file(file_or_string), file_or_string, env), file_or_string);
  // "FILE --flag ...": the file's launch with the flags after it, as sbatch_benchmarking.sh appends its own
  // arguments to the YAML's (ModelZoo @ e8650517 l.41-43; argparse: the last occurrence wins).
  const std::size_t space = file_or_string.find(' ');
  if (space != std::string::npos && file_or_string.compare(space + 1, 2, "--") == 0 &&
      is_launch_file(file_or_string.substr(0, space))) {
    const std::string path = file_or_string.substr(0, space);
    auto t = detail::read_launch_text(read_launch_file(path), path, env);
    const auto extra = detail::read_launch_text(file_or_string.substr(space + 1), path, env);
    t.args.insert(t.args.end(), extra.args.begin(), extra.args.end());
    t.notes.push_back(std::to_string(extra.args.size()) + " words after the file appended to its arguments");
    return named(detail::megatron_reader(t, path).run(), path);
  }
  return import_megatron_args(file_or_string, "megatron arguments", env);
}

}  // namespace headroom
