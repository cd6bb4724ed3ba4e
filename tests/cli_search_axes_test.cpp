// cli_search_axes_test.cpp: `plan --search AXES` (cli/launch_options.cpp, free_searched_axes): the axes an
// imported launch fixes are searched when named, a verdict reached with them fixed says so and names the flag,
// the layout found is spelled as the launch changes it, and each framework keeps to the ZeRO stages it runs.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>

#include "cli_support.hpp"

namespace {

// ModelZoo's Qwen3-30B-A3B YAML with runtime.conf's variables for 16 GPUs (tests/cli_journey_test.cpp).
const std::string qwen =
    " --gpu-type h100-80gb --megatron-var TP=1 --megatron-var PP=1 --megatron-var EP=8 "
    "--megatron-var CP=1 --megatron-var LAYERS_PER_VP=false --megatron-var MBS=1 "
    "--megatron-var GBS=256 --megatron-var SEQ_LEN=4096 --megatron-var "
    "MOE_TOKEN_DISPATCHER=alltoall --megatron-var MOE_GROUPED_GEMM=true";
const std::string qwen_yaml = data + "/megatron/Qwen3-30B-A3B.yaml";

// A Llama-3-8B-shaped pretrain_gpt.py line at tp 1 pp 1, --bf16 without the distributed optimizer (recipe
// bf16-adam-fp32-grads: 18 bytes per parameter on every rank), seq 8192, no recomputation.
const std::string llama =
    "--num-layers 32 --hidden-size 4096 --ffn-hidden-size 14336 --num-attention-heads 32 "
    "--group-query-attention --num-query-groups 8 --swiglu --seq-length 8192 "
    "--max-position-embeddings 8192 --micro-batch-size 1 --global-batch-size 128 --bf16 "
    "--vocab-size 128256 --tensor-model-parallel-size 1 --pipeline-model-parallel-size 1";

bool says(const std::string& s, const std::string& what) {
  return s.find(what) != std::string::npos;
}

// Returns the text between `after` and the end of its line in `s` ("" when absent).
std::string line_after(const std::string& s, const std::string& after) {
  const auto at = s.find(after);
  if (at == std::string::npos) return "";
  const auto from = at + after.size();
  return s.substr(from, s.find('\n', from) - from);
}

// Returns the Megatron flags of "append FLAGS to --megatron-args" in `line`.
std::string megatron_appended(const std::string& line) {
  const auto from = line.find("append ");
  const auto to = line.find(" to --megatron-args");
  if (from == std::string::npos || to == std::string::npos) return "";
  return line.substr(from + 7, to - from - 7);
}

TEST(SearchAxes, APinnedVerdictIsConditionalAndNamesSearch) {
  const auto r = run("plan --megatron-args " + qwen_yaml + qwen + " --gpus 16 --suggest");
  ASSERT_EQ(r.status, 3) << r.err;
  EXPECT_TRUE(says(r.out, "; 1 layouts evaluated, 0 fit")) << r.out;
  EXPECT_TRUE(says(r.out,
                   "nothing fits with tp 1, pp 1, cp 1, ep 8 and recompute none fixed by the launch: "
                   "search them (--search tp,pp,cp,ep,recompute)"))
      << r.out;
  EXPECT_FALSE(says(r.out, "nothing fits: add GPUs, shorten")) << r.out;  // never said as if for every layout
  EXPECT_TRUE(says(r.out,
                   "bound by activations: with tp 1, pp 1, cp 1, ep 8 and recompute none fixed by the "
                   "launch, state fits"))
      << r.out;
  EXPECT_TRUE(says(r.out,
                   "the smallest count with a fitting layout is 32 with tp 1, pp 1, cp 1, ep 8 and "
                   "recompute none fixed by the launch (--min-gpus)"))
      << r.out;
  // --min-gpus says the same of its counts, and what searching them finds.
  const auto m = run("plan --megatron-args " + qwen_yaml + qwen + " --min-gpus");
  ASSERT_EQ(m.status, 0) << m.err;
  EXPECT_TRUE(says(m.out,
                   "smallest GPU count with a fitting layout with tp 1, pp 1, cp 1, ep 8 and recompute none "
                   "fixed by the launch (--search tp,pp,cp,ep,recompute frees them): N = 32"))
      << m.out;
  EXPECT_TRUE(says(m.out,
                   "with them searched (--search tp,pp,cp,ep,recompute), the smallest count with a fitting "
                   "layout is "))
      << m.out;
}

TEST(SearchAxes, NoCountFitsIsSaidForTheFixedAxesOnly) {
  // 18 bytes per parameter unsharded at tp 1 pp 1 and a seq-8192 layer's activations: no count fits as launched.
  const auto r = run("plan --gpu-type h100-80gb --gpus 8 --suggest --megatron-args \"" + llama + "\"");
  ASSERT_EQ(r.status, 3) << r.err;
  EXPECT_TRUE(says(r.out,
                   "more GPUs alone do not help: no count up to 16384 has a fitting layout with tp 1, pp 1, "
                   "ZeRO-0 and recompute none fixed by the launch; free them with --search "
                   "tp,pp,zero,recompute"))
      << r.out;
  EXPECT_TRUE(says(r.out, "with them searched (--search tp,pp,zero,recompute), ")) << r.out;
}

// Plans `launch` with --search AXES on 16 GPUs, then the first layout found as the launch itself, with the flags
// the ranking says to append: the plan of that launch (estimate(), not the search) must fit with the same
// headroom the ranking gives it.
void found_layout_fits_as_launched(const std::string& launch_file, const std::string& launch_vars,
                                   const std::string& axes) {
  const std::string base =
      "plan --megatron-args \"" + launch_file + "\"" + launch_vars + " --gpus 16 --suggest";
  const auto pinned = run(base + " --json -");
  ASSERT_EQ(pinned.status, 3) << pinned.err;
  const auto searched = run(base + " --search " + axes + " --json -");
  ASSERT_EQ(searched.status, 0) << searched.err;
  const auto p = nlohmann::json::parse(pinned.out), s = nlohmann::json::parse(searched.out);
  EXPECT_EQ(p["evaluated"], 1);
  EXPECT_GT(s["evaluated"].get<int>(), 1);
  ASSERT_FALSE(s["fitting"].empty());
  const auto text = run(base + " --search " + axes);
  const std::string flags = megatron_appended(line_after(text.out, "the first under the launch: "));
  ASSERT_FALSE(flags.empty()) << text.out;
  const auto direct =
      run("plan --megatron-args \"" + launch_file + " " + flags + "\"" + launch_vars + " --gpus 16 --json -");
  ASSERT_EQ(direct.status, 0) << flags << "\n" << direct.err;
  const auto d = nlohmann::json::parse(direct.out);
  EXPECT_TRUE(d["fits"].get<bool>());
  EXPECT_EQ(d["headroom_bytes"], s["fitting"][0]["headroom_bytes"]) << flags;
  EXPECT_EQ(d["layout"]["tp"], s["fitting"][0]["layout"]["tp"]);
  EXPECT_EQ(d["layout"]["pp"], s["fitting"][0]["layout"]["pp"]);
  EXPECT_EQ(d["layout"]["recompute"], s["fitting"][0]["layout"]["recompute"]);
}

TEST(SearchAxes, SearchFindsALayoutThePinnedSearchCannot) {
  found_layout_fits_as_launched(qwen_yaml, qwen, "tp,pp,cp,ep,recompute");
  found_layout_fits_as_launched(llama, " --gpu-type h100-80gb", "all");
}

TEST(SearchAxes, UnknownOrUnchangeableAxesAreRefused) {
  const std::string q = "plan --megatron-args " + qwen_yaml + qwen + " --gpus 16 --suggest";
  const auto typo = run(q + " --search tp,ppp");
  EXPECT_EQ(typo.status, 2);
  EXPECT_EQ(lines(typo.err), 1) << typo.err;
  EXPECT_TRUE(says(typo.err,
                   "search: unknown axis 'ppp' (did you mean 'pp'?): the axes are tp, pp, cp, vpp, ep, "
                   "etp, sp, zero, recompute, micro-batch, or all"))
      << typo.err;
  // The launch runs the distributed optimizer: Megatron has no other sharding stage to search.
  const auto zero = run(q + " --search zero");
  EXPECT_EQ(zero.status, 2);
  EXPECT_TRUE(says(zero.err,
                   "search: zero: Megatron runs DDP (ZeRO-0) or its distributed optimizer (ZeRO-1-like), "
                   "never ZeRO-2 or 3"))
      << zero.err;
  const auto tt =
      run("plan --torchtitan-config " + data + "/torchtitan/llama3_70b.toml --gpus 64 --suggest --search sp");
  EXPECT_EQ(tt.status, 2);
  EXPECT_TRUE(
      says(tt.err, "search: sp: torchtitan's tensor-parallel plans shard the sequence whenever tp > 1"))
      << tt.err;
  EXPECT_TRUE(says(run(q + " --search tp --tp 1").err, "search: tp: --tp fixes it on the command line"));
  EXPECT_TRUE(says(run("plan --preset llama3-8b --gpus 8 --suggest --search tp").err,
                   "search: frees the axes an imported launch fixes"));
  EXPECT_TRUE(says(run("plan --megatron-args " + qwen_yaml + qwen + " --gpus 16 --search tp").err,
                   "search: frees axes for --suggest and --min-gpus"));
}

// Returns the ZeRO stages of every layout that fits in `json` (a --suggest document).
std::set<int> fitting_stages(const std::string& json) {
  std::set<int> z;
  const auto doc = nlohmann::json::parse(json);  // held: a range-for over a temporary's member dangles
  for (const auto& c : doc["fitting"]) z.insert(c["layout"]["zero"].get<int>());
  return z;
}

TEST(SearchAxes, EachFrameworkRanksOnlyTheZeroStagesItRuns) {
  // Megatron: DDP or the distributed optimizer, whatever the recipes searched could shard.
  const auto m =
      run("plan --gpu-type h100-80gb --gpus 8 --suggest --json - --search all --recipes "
          "bf16-adam,bf16-adam8bit --megatron-args \"" +
          llama + "\"");
  ASSERT_EQ(m.status, 0) << m.err;
  const std::set<int> megatron = fitting_stages(m.out);
  EXPECT_EQ(megatron, (std::set<int>{0, 1}));
  // The same model from the command line searches ZeRO 2 and 3 as well (the recipe runs them).
  const auto free =
      run("plan --preset llama3-8b --attention flash --gpu-type h100-80gb --gpus 8 --suggest "
          "--json - --seq 8192 --recipes bf16-adam,bf16-adam8bit");
  ASSERT_EQ(free.status, 0) << free.err;
  EXPECT_TRUE(fitting_stages(free.out).count(3)) << free.out.substr(0, 400);
  // torchtitan's FSDP launch ranks FSDP (ZeRO-3) layouts; DeepSpeed's JSON searches stages 0 to 3.
  const auto t = run("plan --torchtitan-config " + data +
                     "/torchtitan/llama3_70b.toml --gpu-type h100-80gb "
                     "--gpus 64 --suggest --json - --search all");
  ASSERT_EQ(t.status, 0) << t.err;
  EXPECT_EQ(fitting_stages(t.out), (std::set<int>{3}));
  const auto ds = run("plan --preset llama3-8b --deepspeed-config " + data +
                      "/deepspeed/ds_config_z3.json "
                      "--gpu-type h100-80gb --gpus 8 --micro-batch 1 --trainer-precision bf16 "
                      "--gradient-accumulation-steps 1 --suggest --json - --search zero");
  ASSERT_EQ(ds.status, 0) << ds.err;
  const auto ds_doc = nlohmann::json::parse(ds.out);
  for (const auto& a : ds_doc["search_space"])
    if (a["axis"] == "zero") {
      EXPECT_EQ(a["values"], nlohmann::json::array({0, 1, 2, 3}));
    }
  EXPECT_EQ(fitting_stages(ds.out), (std::set<int>{0, 1, 2, 3}));
}

}  // namespace
