// validation_test.cpp: `headroom validate`'s library (calibrate/validation.hpp): the shipped pack agrees row
// by row, each row cited and given in the canonical problem JSON form; its out-of-memory rows are many and
// encode what the papers print (Korthikanti et al.'s Table 3 per activation mode, checked against the paper's
// text here, not against the planner); a contradiction is a disagreement with its reason; a malformed pack or
// row is bad input naming it. The measured pack (presets/validation/measured.json): each priced row is the
// benchmark's layout and torchtitan's model dimensions (derived here from torchtitan's rules), each unmodelled
// one is skipped with why; a calibration fitted on planted rows recovers the held-out rows.
#include "calibrate/validation.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "planner/errors.hpp"
#include "planner/estimate.hpp"
#include "planner/model_files.hpp"
#include "planner/problem_json.hpp"
#include "probes/records/schema.hpp"
#include "test_support.hpp"

namespace headroom::calibrate {
namespace {

// Returns a row of `kind` for `preset` on `gpus` GPUs of `gib` GiB under ZeRO `zero`.
nlohmann::json row(const std::string& id, const std::string& kind, const std::string& preset, int gpus,
                   int zero, std::int64_t gib) {
  problem p = test::preset_problem(preset);
  p.device.capacity = gib * headroom::gib;
  layout l;
  l.gpus = gpus;
  l.zero = zero;
  return {{"id", id},
          {"kind", kind},
          {"citation", "test"},
          {"published", {{"gpu", "test card"}}},
          {"problem", problem_to_json(p)},
          {"layout", layout_to_json(l)}};
}

nlohmann::json pack_of(std::vector<nlohmann::json> rows) {
  return {{"schema", records::schema_of(records::kind::validation_pack)}, {"rows", rows}};
}

// Returns the bad_input text of validating `pack`, or "" when it is accepted.
std::string refusal(const nlohmann::json& pack) {
  try {
    validate_pack(pack, "pack.json");
  } catch (const bad_input& e) {
    return e.what();
  }
  return "";
}

TEST(Validation, ShippedPackNamesItsDisagreementsAndEveryRowIsCitedInProblemJsonForm) {
  const std::string path = default_validation_pack();
  const nlohmann::json pack = read_json_file(path);
  const auto results = validate_pack(pack, path);
  ASSERT_EQ(results.size(), 93u);
  // Three published outcomes the planner gets wrong today (docs/validation.md, "Disagreements"): kept in the
  // pack, named here so that a third, or one of these turning, is seen.
  const std::set<std::string> known = {
      "narayanan ZeRO-3 529.6B on 640 A100 80GB, micro-batch 4: fits",
      "narayanan figure 17: 145.6B on 128 A100 80GB, batch 16, none recompute: OOM",
      "Megatron-MoE-ModelZoo Qwen3-235B-A22B on 256 H100 80GB, TP 2 PP 8 VPP 4 EP 32, embedding and loss "
      "counted: fits"};
  EXPECT_EQ(disagreements(results), 3);
  for (const auto& r : results) {
    EXPECT_EQ(r.agrees, !known.count(r.id)) << r.id << ": " << r.why;
    EXPECT_FALSE(r.citation.empty()) << r.id;
  }
  // Each row's case is exactly what the records carry: reading and writing it again changes nothing.
  for (const auto& j : pack["rows"]) {
    EXPECT_EQ(problem_to_json(problem_from_json(j["problem"], "p")), j["problem"]) << j["id"];
    EXPECT_EQ(layout_to_json(layout_from_json(j["layout"], "l")), j["layout"]) << j["id"];
  }
  const nlohmann::json out = validation_to_json(results, path);
  EXPECT_EQ(out["schema"], records::schema_of(records::kind::validate));
  EXPECT_EQ(out["pack"], path);
  EXPECT_EQ(out["rows"].size(), 93u);
  EXPECT_EQ(out["disagreements"], 3);
  EXPECT_TRUE(out["rows"][0].contains("relative_error"));
}

// Returns the shipped pack's row called `id`, or null.
nlohmann::json shipped_row(const nlohmann::json& pack, const std::string& id) {
  for (const auto& r : pack["rows"])
    if (r["id"] == id) return r;
  return nullptr;
}

// A planner that always answered "fits" must fail the pack: it holds the out-of-memory outcomes the sources
// publish (Korthikanti et al. 12, Narayanan et al. 2, ZeRO 1, llm-foundry 1, torchtitan 3), and every outcome
// row says what its source published and what the row assumes.
TEST(Validation, ShippedPackHoldsPublishedOutOfMemoryRowsAndSaysWhatIsAssumed) {
  const nlohmann::json pack = read_json_file(default_validation_pack());
  int oom = 0, trained = 0;
  for (const auto& r : pack["rows"]) {
    const std::string kind = r["kind"];
    oom += kind == "oom";
    trained += kind == "trained";
    if (kind == "layer_activations") continue;
    const std::string expresses = r.value("expresses", "");
    EXPECT_NE(expresses.find("published:"), std::string::npos) << r["id"];
    EXPECT_NE(expresses.find("assumed"), std::string::npos) << r["id"];
  }
  EXPECT_EQ(oom, 19);
  EXPECT_EQ(trained, 54);
}

// torchtitan's pytorch/torchtitan:docs/performance.md tables on 64 A100 80GB with FSDP2 (@395a526 for Llama 2, @1ea476e9f for
// Llama 3): each row carries the table's model, local batch and checkpointing, FSDP over all 64 ranks, the
// sequence of that commit's train config (Llama 2 4096, Llama 3 8192), and torchtitan's policies by name:
// "selective op" is the op policy (selective-op), "selective layer" the layer policy at its default option 2
// (full-every-2). The published outcome is the table's: OOM, or a throughput, so it ran.
TEST(Validation, TorchtitanA100RowsCarryTheDocsTables) {
  const nlohmann::json pack = read_json_file(default_validation_pack());
  const struct {
    const char* id;
    const char* model;
    int local_batch, seq;
    const char* recompute;
    const char* kind;
  } table[] = {
      {"torchtitan Llama 2 13B on 64 A100 80GB, FSDP, local batch 2, no AC: fits", "llama2-13b", 2, 4096, "none",
       "trained"},
      {"torchtitan Llama 2 13B on 64 A100 80GB, FSDP, local batch 2, selective layer AC: fits", "llama2-13b", 2, 4096,
       "full-every-2", "trained"},
      {"torchtitan Llama 2 13B on 64 A100 80GB, FSDP, local batch 2, selective op AC: fits", "llama2-13b", 2, 4096,
       "selective-op", "trained"},
      {"torchtitan Llama 2 70B on 64 A100 80GB, FSDP, local batch 2, selective layer AC: OOM", "llama2-70b", 2, 4096,
       "full-every-2", "oom"},
      {"torchtitan Llama 2 70B on 64 A100 80GB, FSDP, local batch 2, selective op AC: OOM", "llama2-70b", 2, 4096,
       "selective-op", "oom"},
      {"torchtitan Llama 2 70B on 64 A100 80GB, FSDP, local batch 1, selective op AC: fits", "llama2-70b", 1, 4096,
       "selective-op", "trained"},
      {"torchtitan Llama 2 70B on 64 A100 80GB, FSDP, local batch 2, full AC: fits", "llama2-70b", 2, 4096, "full",
       "trained"},
      {"torchtitan Llama 3 8B on 64 A100 80GB, FSDP, local batch 1, selective layer AC: fits", "llama3-8b", 1, 8192,
       "full-every-2", "trained"},
      {"torchtitan Llama 3 8B on 64 A100 80GB, FSDP, local batch 1, selective op AC: fits", "llama3-8b", 1, 8192,
       "selective-op", "trained"},
      {"torchtitan Llama 3 70B on 64 A100 80GB, FSDP, local batch 1, full AC: fits", "llama3-70b", 1, 8192, "full",
       "trained"}};
  for (const auto& t : table) {
    const nlohmann::json r = shipped_row(pack, t.id);
    ASSERT_FALSE(r.is_null()) << t.id;
    EXPECT_EQ(r["kind"], t.kind) << t.id;
    EXPECT_EQ(r["problem"]["model"]["name"], t.model) << t.id;
    const auto& training = r["problem"]["training"];
    EXPECT_EQ(training["micro_batch"], t.local_batch) << t.id;
    EXPECT_EQ(training["global_batch"], 64 * t.local_batch) << t.id;
    EXPECT_EQ(training["seq"], t.seq) << t.id;
    EXPECT_EQ(training["attention"], "flash") << t.id;
    EXPECT_EQ(training["loss"], "unfused") << t.id;  // the model's output .float() before F.cross_entropy
    const auto& layout = r["layout"];
    EXPECT_EQ(layout["gpus"], 64) << t.id;
    EXPECT_EQ(layout["dp"], 64) << t.id;
    EXPECT_EQ(layout["tp"], 1) << t.id;
    EXPECT_EQ(layout["zero"], 3) << t.id;
    EXPECT_EQ(layout["recompute"], t.recompute) << t.id;
    // FSDP2's MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32): fp32 shards, a bf16 gathered copy.
    const auto& recipe = r["problem"]["recipe"];
    EXPECT_EQ(recipe["gather_bytes"], 2) << t.id;
    int bytes = 0;
    for (const auto& b : recipe["buffers"]) bytes += b["bytes"].get<int>();
    EXPECT_EQ(bytes, 16) << t.id;
    EXPECT_EQ(r["problem"]["device"]["capacity_bytes"], 80LL << 30) << t.id;
  }
}

// Megatron-MoE-ModelZoo's H100 best practice (yanring/Megatron-MoE-ModelZoo@e865051): DeepSeek-V3 with the
// layout string Et|(tt|)*30mL (32 virtual stages: 1, 30 x 2, 0 decoder layers) and Qwen3-235B-A22B with the
// embedding and the loss counted as pipeline layers, both on pp 8 x vpp 4; the rows carry those splits and
// the launches' parallel degrees, not an evened-out stand-in.
TEST(Validation, ModelZooRowsCarryTheirUnevenInterleavedSplits) {
  const nlohmann::json pack = read_json_file(default_validation_pack());
  const nlohmann::json dsv3 = shipped_row(
      pack, "Megatron-MoE-ModelZoo DeepSeek-V3 on 1024 H100 80GB, FP8, TP 2 PP 8 VPP 4 EP 64, layout Et|(tt|)*30mL: fits");
  ASSERT_FALSE(dsv3.is_null());
  std::vector<std::int64_t> layout(32, 2);
  layout.front() = 1;
  layout.back() = 0;
  EXPECT_EQ(dsv3["problem"]["training"]["pipeline_split"]["layers"].get<std::vector<std::int64_t>>(), layout);
  EXPECT_EQ(dsv3["layout"]["gpus"], 1024);
  EXPECT_EQ(dsv3["layout"]["tp"], 2);
  EXPECT_EQ(dsv3["layout"]["pp"], 8);
  EXPECT_EQ(dsv3["layout"]["vpp"], 4);
  EXPECT_EQ(dsv3["layout"]["ep"], 64);
  EXPECT_EQ(dsv3["problem"]["model"]["layers"], 61);
  const nlohmann::json qwen = shipped_row(pack,
                                          "Megatron-MoE-ModelZoo Qwen3-235B-A22B on 256 H100 80GB, TP 2 PP 8 VPP 4 "
                                          "EP 32, embedding and loss counted: fits");
  ASSERT_FALSE(qwen.is_null());
  const auto& split = qwen["problem"]["training"]["pipeline_split"];
  EXPECT_TRUE(split["embedding_as_layer"].get<bool>());
  EXPECT_TRUE(split["loss_as_layer"].get<bool>());
  EXPECT_EQ(qwen["problem"]["model"]["layers"], 94);
  EXPECT_EQ(qwen["layout"]["vpp"], 4);
  EXPECT_EQ(qwen["layout"]["ep"], 32);
  EXPECT_EQ(qwen["kind"], "trained");
}

// Korthikanti et al. (arXiv 2205.05198): Table 3's four configurations, each in five activation modes. The
// labels are the paper's text: section 1 (the tensor-parallel baseline needs more than 80 GB for all four),
// section 6.1 ("Without the memory savings provided by sequence parallelism and selective recompute together,
// none of the these models will fit into memory") and Table 5 (full recomputation and sequence parallelism +
// selective recomputation both ran). Section 6: interleaving m = 3 for 175B and 530B; 80GB A100s.
TEST(Validation, KorthikantiRowsCarryTable3AndThePapersLabels) {
  const nlohmann::json pack = read_json_file(default_validation_pack());
  const struct {
    const char* model;
    int gpus, pp, vpp, micro_batch, global_batch;
  } table3[] = {{"22b", 8, 1, 1, 4, 4},
                {"175b", 64, 8, 3, 1, 64},
                {"530b", 280, 35, 3, 1, 280},
                {"1t", 512, 64, 1, 1, 512}};
  const struct {
    const char* mode;
    const char* recompute;
    bool sequence_parallel;
    const char* kind;
  } modes[] = {{"none", "none", false, "oom"},
               {"sp", "none", true, "oom"},
               {"sel", "selective", false, "oom"},
               {"sp+sel", "selective", true, "trained"},
               {"full", "full", false, "trained"}};
  for (const auto& m : table3)
    for (const auto& mode : modes) {
      const std::string id = std::string("korthikanti-") + m.model + " " + mode.mode + " on " +
                             std::to_string(m.gpus) +
                             " A100 80GB: " + (std::string(mode.kind) == "oom" ? "OOM" : "fits");
      const nlohmann::json r = shipped_row(pack, id);
      ASSERT_FALSE(r.is_null()) << id;
      EXPECT_EQ(r["kind"], mode.kind) << id;
      const layout l = layout_from_json(r["layout"], "l");
      const problem p = problem_from_json(r["problem"], "p");
      EXPECT_EQ(l.gpus, m.gpus) << id;
      EXPECT_EQ(l.tp, 8) << id;
      EXPECT_EQ(l.pp, m.pp) << id;
      EXPECT_EQ(l.dp(), 1) << id;  // "no data parallelism is used in our evaluations"
      EXPECT_EQ(l.vpp, m.vpp) << id;
      EXPECT_EQ(r["layout"]["recompute"], mode.recompute) << id;
      EXPECT_EQ(l.sequence_parallel, mode.sequence_parallel) << id;
      EXPECT_EQ(p.training.seq, 2048) << id;
      EXPECT_EQ(p.training.micro_batch, m.micro_batch) << id;
      EXPECT_EQ(p.training.global_batch, m.global_batch) << id;
      EXPECT_EQ(p.model.vocab, 51200) << id;
      EXPECT_EQ(p.device.capacity, 80 * headroom::gib) << id;
    }
}

// Narayanan et al. (arXiv 2104.04473) Table 2: the 530B model under ZeRO-3 without model parallelism did not
// fit on 560 GPUs at micro-batch 4 (the caption); 640 GPUs at batch 2560 ran.
TEST(Validation, NarayananZero3RowsCarryTable2) {
  const nlohmann::json pack = read_json_file(default_validation_pack());
  const struct {
    const char* id;
    int gpus, micro_batch, global_batch;
    const char* kind;
  } rows[] = {{"narayanan ZeRO-3 529.6B on 560 A100 80GB, micro-batch 4: OOM", 560, 4, 2240, "oom"},
              {"narayanan ZeRO-3 529.6B on 640 A100 80GB, micro-batch 4: fits", 640, 4, 2560, "trained"},
              {"narayanan ZeRO-3 529.6B on 1120 A100 80GB, micro-batch 2: fits", 1120, 2, 2240, "trained"},
              {"narayanan ZeRO-3 529.6B on 2240 A100 80GB, micro-batch 1: fits", 2240, 1, 2240, "trained"},
              {"narayanan ZeRO-3 174.6B on 384 A100 80GB, micro-batch 4: fits", 384, 4, 1536, "trained"}};
  for (const auto& x : rows) {
    const nlohmann::json r = shipped_row(pack, x.id);
    ASSERT_FALSE(r.is_null()) << x.id;
    EXPECT_EQ(r["kind"], x.kind) << x.id;
    const layout l = layout_from_json(r["layout"], "l");
    const problem p = problem_from_json(r["problem"], "p");
    EXPECT_EQ(l.gpus, x.gpus) << x.id;
    EXPECT_EQ(l.dp(), x.gpus) << x.id;  // "without model parallelism"
    EXPECT_EQ(l.zero, 3) << x.id;
    EXPECT_EQ(p.training.micro_batch, x.micro_batch) << x.id;
    EXPECT_EQ(p.training.global_batch, x.global_batch) << x.id;
  }
}

TEST(Validation, AContradictionDisagreesAndSaysWhy) {
  const auto results = validate_pack(pack_of({row("tiny card", "trained", "gpt3-175b", 8, 3, 80),
                                              row("huge card", "oom", "gpt3-125m", 1, 0, 80)}),
                                     "pack.json");
  ASSERT_EQ(results.size(), 2u);
  EXPECT_FALSE(results[0].agrees);
  EXPECT_EQ(results[0].why, "a run that trained is predicted not to fit");
  EXPECT_EQ(results[0].published, "trained on test card");
  EXPECT_EQ(results[0].predicted.rfind("does not fit, ", 0), 0u) << results[0].predicted;
  EXPECT_FALSE(results[1].agrees);
  EXPECT_EQ(results[1].why, "a published out-of-memory is predicted to fit");
  EXPECT_EQ(disagreements(results), 2);
  EXPECT_EQ(validation_to_json(results, "p")["rows"][1]["why"], results[1].why);
}

TEST(Validation, AMalformedPackOrRowIsBadInputNamingIt) {
  EXPECT_NE(refusal({{"schema", "other"}, {"rows", nlohmann::json::array()}})
                .find("not a headroom.validation document"),
            std::string::npos);
  EXPECT_NE(refusal({{"schema", "headroom.validation/1"}, {"rows", nlohmann::json::array()}})
                .find("no longer read"),
            std::string::npos);
  auto bad = row("x", "maybe", "gpt3-125m", 1, 0, 80);
  EXPECT_NE(refusal(pack_of({bad})).find("kind must be"), std::string::npos);
  bad = row("x", "oom", "gpt3-125m", 1, 0, 80);
  bad.erase("problem");
  EXPECT_NE(refusal(pack_of({bad})).find("row 'x': missing object field 'problem'"), std::string::npos);
  bad = row("x", "oom", "gpt3-125m", 1, 0, 80);
  bad["layout"]["tp"] = 5;
  EXPECT_NE(refusal(pack_of({bad})).find("row 'x': gpus: tp*pp*cp = 5"), std::string::npos)
      << refusal(pack_of({bad}));
  bad = row("x", "oom", "gpt3-125m", 1, 0, 80);
  bad["problem"]["training"].erase("seq");
  EXPECT_NE(refusal(pack_of({bad})).find("row 'x': problem.training"), std::string::npos);
  bad = row("x", "layer_activations", "gpt3-125m", 1, 0, 80);
  EXPECT_NE(refusal(pack_of({bad})).find("published.bytes missing"), std::string::npos);
  bad.erase("citation");
  EXPECT_NE(refusal(pack_of({bad})).find("missing string field 'citation'"), std::string::npos);
}

// torchtitan's FFN width (pytorch/torchtitan@9dec370 torchtitan/models/llama/model.py FeedForward): 2/3 of
// 4 x dim, times ffn_dim_multiplier, rounded up to multiple_of.
std::int64_t measured_torchtitan_ffn(std::int64_t dim, double multiplier, std::int64_t multiple_of) {
  auto hidden = static_cast<std::int64_t>(2 * 4 * dim / 3);
  hidden = static_cast<std::int64_t>(multiplier * static_cast<double>(hidden));
  return multiple_of * ((hidden + multiple_of - 1) / multiple_of);
}

// The rows of torchtitan's benchmark tables (benchmarks/llama3_h100_202412_torchtitan.md at b5bcd76c) are
// those tables exactly (Tables 1-4 priced where expressible), with the models of
// torchtitan/models/llama/__init__.py at 9dec370; every other row of those tables is listed as skipped with
// why, with its published figure. No shipped row is marked for the calibration: the fit rule picks them.
TEST(Validation, MeasuredPackIsTheTorchtitanTablesExactly) {
  const nlohmann::json pack = read_json_file(default_measured_pack());
  const auto rows = validation_rows(pack, "measured.json");
  const struct {
    int gpus, fsdp, tp, cp;
    std::int64_t seq, local_batch;
    double gib;
    std::int64_t dim, layers, heads;
    double multiplier;
    std::int64_t multiple_of;
    recompute_mode recompute = recompute_mode::full;
  } priced[] = {{8, 8, 1, 1, 32768, 1, 83.9, 4096, 32, 32, 1.3, 1024},
                {8, 4, 1, 2, 65536, 1, 84.2, 4096, 32, 32, 1.3, 1024},
                {8, 2, 1, 4, 131072, 1, 84.0, 4096, 32, 32, 1.3, 1024},
                {8, 1, 1, 8, 262144, 1, 84.5, 4096, 32, 32, 1.3, 1024},
                {256, 32, 8, 1, 8192, 16, 71.9, 8192, 80, 64, 1.3, 4096},
                // Tables 1 and 3, FSDP and FSDP + torch.compile: selective_ac_option 'op' in
                // train_configs/llama3_8b.toml at 9dec370, sequence 8192, local batch 2.
                {8, 8, 1, 1, 8192, 2, 82.4, 4096, 32, 32, 1.3, 1024, recompute_mode::selective_op},
                {8, 8, 1, 1, 8192, 2, 77.0, 4096, 32, 32, 1.3, 1024, recompute_mode::selective_op},
                {128, 128, 1, 1, 8192, 2, 67.0, 4096, 32, 32, 1.3, 1024, recompute_mode::selective_op},
                {128, 128, 1, 1, 8192, 2, 62.0, 4096, 32, 32, 1.3, 1024, recompute_mode::selective_op}};
  // Published figures of the rows the planner cannot price: Tables 1, 3 with Float8 (the per-op policy does
  // not save torch._scaled_mm's outputs), 4 AsyncTP, 5, 6.
  const std::multiset<double> skipped_tables = {76.8, 61.8, 67.6, 82.5, 72.7, 75.3, 75.9, 77.1, 84.9};
  std::multiset<double> skipped_seen;
  std::size_t i = 0, fit = 0;
  for (const auto& row : rows) {
    EXPECT_EQ(row.kind, "measured_peak") << row.id;
    EXPECT_FALSE(row.citation.empty()) << row.id;
    EXPECT_NE(row.published.value("figure", ""), "") << row.id;
    if (!row.skipped.empty()) {
      if (row.citation.find("llama3_h100_202412_torchtitan.md") != std::string::npos)
        skipped_seen.insert(row.published["gib"].get<double>());
      EXPECT_NE(row.skipped.find("not "), std::string::npos) << row.id;
      continue;
    }
    fit += row.fit_on;
    if (row.citation.find("llama3_h100_202412_torchtitan.md") == std::string::npos) continue;
    ASSERT_LT(i, std::size(priced)) << row.id;
    const auto& x = priced[i++];
    EXPECT_EQ(row.published["figure"], "reserved_peak") << row.id;  // torchtitan logs max_reserved
    EXPECT_DOUBLE_EQ(row.published["gib"].get<double>(), x.gib) << row.id;
    EXPECT_EQ(row.l.gpus, x.gpus) << row.id;
    EXPECT_EQ(row.l.tp, x.tp) << row.id;
    EXPECT_EQ(row.l.cp, x.cp) << row.id;
    EXPECT_EQ(row.l.pp, 1) << row.id;
    EXPECT_EQ(row.l.dp(), x.fsdp) << row.id;
    EXPECT_EQ(row.l.zero, 3) << row.id;  // FSDP2: parameters, gradients and states sharded
    EXPECT_EQ(row.l.recompute, x.recompute) << row.id;
    EXPECT_EQ(row.l.sequence_parallel, x.tp > 1) << row.id;
    EXPECT_EQ(row.p.training.seq, x.seq) << row.id;
    EXPECT_EQ(row.p.training.micro_batch, x.local_batch) << row.id;
    EXPECT_EQ(row.p.precision.name, "fsdp2-bf16") << row.id;
    EXPECT_EQ(row.p.precision.gathered_bytes_per_param(), 2) << row.id;  // param_dtype=bf16
    EXPECT_EQ(row.p.model.hidden, x.dim) << row.id;
    EXPECT_EQ(row.p.model.layers, x.layers) << row.id;
    EXPECT_EQ(row.p.model.heads, x.heads) << row.id;
    EXPECT_EQ(row.p.model.kv_heads, 8) << row.id;
    EXPECT_EQ(row.p.model.vocab, 128256) << row.id;
    EXPECT_EQ(row.p.model.ffn_hidden, measured_torchtitan_ffn(x.dim, x.multiplier, x.multiple_of)) << row.id;
  }
  EXPECT_EQ(i, std::size(priced));
  EXPECT_EQ(fit, 0u);
  EXPECT_EQ(skipped_seen, skipped_tables);
  // Each priced row's case is exactly what the records carry.
  for (const auto& j : pack["rows"]) {
    if (j.contains("skipped")) continue;
    EXPECT_EQ(problem_to_json(problem_from_json(j["problem"], "p")), j["problem"]) << j["id"];
    EXPECT_EQ(layout_to_json(layout_from_json(j["layout"], "l")), j["layout"]) << j["id"];
  }
}

// Returns a measured row of `preset` on 8 GPUs whose published reserved peak is planted: the planner's held
// terms + `frag` x churn + `per_token` x tokens.
nlohmann::json measured_planted_row(const std::string& id, const std::string& preset, std::int64_t seq,
                                    int micro_batch, int zero, double frag, double per_token, bool fit_on) {
  problem p = test::preset_problem(preset);
  p.training.seq = seq;
  p.training.micro_batch = micro_batch;
  p.training.global_batch = 8 * micro_batch;
  layout l;
  l.gpus = 8;
  l.zero = zero;
  const auto t = estimate(p, l).worst_stage().terms();
  const double bytes = static_cast<double>(t.held()) + frag * static_cast<double>(t.churn()) +
                       per_token * static_cast<double>(seq * micro_batch);
  nlohmann::json r = {
      {"id", id},
      {"kind", "measured_peak"},
      {"citation", "planted"},
      {"published", {{"gib", bytes / static_cast<double>(headroom::gib)}, {"figure", "reserved_peak"}}},
      {"problem", problem_to_json(p)},
      {"layout", layout_to_json(l)}};
  if (fit_on) r["calibration"] = "fit";
  return r;
}

// A calibration fitted on two planted rows recovers the rows it never saw; the uncalibrated errors are the
// rows' own; measured rows are never judged (no disagreement), and a skipped row is counted, not priced. Two
// models, so that the fit puts the planted reserve on its generic terms (calibration.hpp: records of one model
// put their size-dependent reserve on that model's activation factor instead).
TEST(Validation, CalibrationFittedOnSomeRowsPredictsTheHeldOutOnes) {
  const double frag = 0.25, per_token = 20000;
  const auto pack = pack_of({measured_planted_row("fit a", "gpt3-1.3b", 2048, 1, 1, frag, per_token, true),
                             measured_planted_row("fit b", "gpt3-2.7b", 1024, 4, 3, frag, per_token, true),
                             measured_planted_row("held c", "gpt3-1.3b", 4096, 2, 2, frag, per_token, false),
                             measured_planted_row("held d", "gpt3-2.7b", 512, 8, 0, frag, per_token, false),
                             {{"id", "skip e"},
                              {"kind", "measured_peak"},
                              {"citation", "planted"},
                              {"published", {{"gib", 50}, {"figure", "reserved_peak"}}},
                              {"skipped", "not modelled: a setting"}}});
  const auto rows = validation_rows(pack, "planted.json");
  std::vector<validation_result> results;
  for (const auto& r : rows) results.push_back(evaluate(r));
  EXPECT_EQ(disagreements(results), 0);
  const measured_summary s = summarise_measured(rows, results);
  EXPECT_EQ(s.priced, 4);
  EXPECT_EQ(s.skipped, 1);
  ASSERT_TRUE(s.calibrated) << s.calibration;
  EXPECT_EQ(s.fitted_on, (std::vector<std::string>{"fit a", "fit b"}));
  EXPECT_EQ(s.uncalibrated.n, 4);
  EXPECT_EQ(s.uncalibrated_held_out.n, 2);
  // Both held rows lie beyond the fitted rows' predicted step peaks (19-40 GB) by more than domain_margin
  // (held c also beyond their tokens): they are summarised apart, as outside the domain, where a planted
  // reserve, linear in its terms, is still recovered.
  EXPECT_EQ(s.calibrated_held_out.n, 0);
  EXPECT_EQ(s.calibrated_outside_domain.n, 2);
  ASSERT_EQ(results[2].outside_domain.size(), 2u);
  EXPECT_EQ(results[2].outside_domain[0].rfind("tokens per micro-batch:", 0), 0u);
  ASSERT_EQ(results[3].outside_domain.size(), 1u);
  EXPECT_EQ(results[3].outside_domain[0].rfind("predicted step peak:", 0), 0u);
  double mean = 0;
  for (int k = 0; k < 4; ++k) mean += std::fabs(results[static_cast<std::size_t>(k)].error) / 4;
  EXPECT_NEAR(s.uncalibrated.mean_abs, mean, 1e-12);
  EXPECT_GT(s.uncalibrated.mean_abs, 0.01);         // the default reserve is not the planted one
  EXPECT_LT(s.calibrated_outside_domain.mean_abs, 1e-6);  // the planted terms, recovered
  EXPECT_LT(std::fabs(s.calibrated_outside_domain.worst), 1e-6);
  EXPECT_TRUE(results[4].skipped);
  EXPECT_FALSE(results[4].calibrated_bytes.has_value());
  const auto j = validation_to_json(results, "planted.json", &s);
  EXPECT_EQ(j["rows"].size(), 0u);  // judged rows only
  EXPECT_EQ(j["measured"]["rows"].size(), 5u);
  EXPECT_EQ(j["measured"]["fitted_on"].size(), 2u);
  EXPECT_EQ(j["measured"]["rows"][4]["why"], "not modelled: a setting");
}

// The shipped measured pack: at least 30 priced rows; the calibration fitted on every fifth reserved or
// device-used row (calibration_rows) and judged on the rest; torchtitan's reserved peaks through the
// allocator emulation within the accuracy docs/validation.md reports (a guard against a term that moves them,
// not a tuning target: the rows were entered before the emulation was compared with them).
TEST(Validation, ShippedMeasuredPackIsPricedAndCalibrated) {
  const auto rows = validation_rows(read_json_file(default_measured_pack()), "measured.json");
  std::vector<validation_result> results;
  for (const auto& r : rows) results.push_back(evaluate(r));
  const measured_summary s = summarise_measured(rows, results);
  EXPECT_GE(s.priced, 30);
  EXPECT_EQ(s.skipped + s.priced, static_cast<int>(rows.size()));
  EXPECT_TRUE(s.calibrated) << s.calibration;
  int reserve_rows = 0;
  error_stats torchtitan;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const auto& r = results[i];
    if (r.skipped) continue;
    const std::string figure = rows[i].published.value("figure", "");
    EXPECT_TRUE(r.predicted_bytes > 0) << r.id;
    EXPECT_TRUE(r.emulated) << r.id;  // every shipped case replays through the allocator emulation
    if (figure == "allocated_peak") {
      EXPECT_FALSE(r.calibrated_bytes.has_value()) << r.id;  // no reserve in an allocated peak
      EXPECT_FALSE(r.fit_on) << r.id;
      continue;
    }
    EXPECT_TRUE(r.calibrated_bytes.has_value()) << r.id;
    EXPECT_EQ(r.fit_on, ++reserve_rows % 5 == 0) << r.id;
    if (rows[i].citation.find("llama3_h100_202412_torchtitan.md") != std::string::npos) {
      ++torchtitan.n;
      torchtitan.mean_abs += std::fabs(r.error);
      torchtitan.worst = std::max(torchtitan.worst, std::fabs(r.error));
    }
  }
  EXPECT_EQ(static_cast<int>(s.fitted_on.size()), reserve_rows / 5);
  ASSERT_EQ(torchtitan.n, 9);
  EXPECT_LT(torchtitan.mean_abs / torchtitan.n, 0.03);
  EXPECT_LT(torchtitan.worst, 0.08);
  EXPECT_EQ(s.coverage_rows, reserve_rows - reserve_rows / 5);
}

// The fit rule: every fifth reserved or device-used row, skipping rows a pack marks "held_out"; rows marked
// "fit" override it.
TEST(Validation, FitRuleHonoursHeldOutMarks) {
  std::vector<nlohmann::json> js;
  for (int k = 0; k < 6; ++k)
    js.push_back(measured_planted_row("r" + std::to_string(k), "gpt3-1.3b", 1024 * (1 + k % 3), 1 + k % 2, k % 3,
                                      0.1, 0, false));
  std::string rule;
  auto rows = validation_rows(pack_of(js), "rule.json");
  EXPECT_EQ(calibration_rows(rows, rule), (std::vector<bool>{false, false, false, false, true, false}));
  js[0]["calibration"] = "held_out";  // the fifth unmarked row is now r5
  rows = validation_rows(pack_of(js), "rule.json");
  EXPECT_EQ(calibration_rows(rows, rule), (std::vector<bool>{false, false, false, false, false, true}));
  for (auto& j : js) j["calibration"] = "held_out";
  rows = validation_rows(pack_of(js), "rule.json");
  EXPECT_EQ(calibration_rows(rows, rule), std::vector<bool>(6, false));
  js[2]["calibration"] = "fit";
  rows = validation_rows(pack_of(js), "rule.json");
  EXPECT_EQ(calibration_rows(rows, rule), (std::vector<bool>{false, false, true, false, false, false}));
  EXPECT_NE(rule.find("marks"), std::string::npos) << rule;
}

TEST(Validation, AMalformedMeasuredRowIsBadInputNamingIt) {
  auto good = measured_planted_row("m", "gpt3-1.3b", 2048, 1, 1, 0.1, 0, false);
  auto bad = good;
  bad["calibration"] = "maybe";
  EXPECT_NE(refusal(pack_of({bad})).find("calibration must be"), std::string::npos);
  bad = good;
  bad["published"]["figure"] = 7;
  EXPECT_NE(refusal(pack_of({bad})).find("row 'm': published.figure must be a string"), std::string::npos);
  bad = good;
  bad["published"]["stage"] = "first";
  EXPECT_NE(refusal(pack_of({bad})).find("published.stage must be"), std::string::npos);
  bad = good;
  bad["published"]["stage"] = 3;  // an 8-GPU data-parallel case has one stage
  EXPECT_NE(refusal(pack_of({bad})).find("a stage index from 0 to 0"), std::string::npos);
  bad = good;
  bad["published"]["figure"] = "allocated_peak";
  bad["calibration"] = "fit";
  EXPECT_NE(refusal(pack_of({bad})).find("an allocated peak holds no reserve"), std::string::npos);
  bad = good;
  bad["published"]["figure"] = "allocated";
  EXPECT_NE(refusal(pack_of({bad})).find("published.figure must be"), std::string::npos);
  bad = good;
  bad["published"].erase("gib");
  EXPECT_NE(refusal(pack_of({bad})).find("published.gib missing"), std::string::npos);
  bad = good;
  bad["skipped"] = "not modelled";
  EXPECT_NE(refusal(pack_of({bad})).find("carries no case"), std::string::npos);
  bad.erase("problem");
  bad.erase("layout");
  bad["calibration"] = "fit";
  EXPECT_NE(refusal(pack_of({bad})).find("cannot be fitted on"), std::string::npos);
  bad = good;
  bad["kind"] = "oom";
  bad["skipped"] = "x";
  EXPECT_NE(refusal(pack_of({bad})).find("belong to measured_peak rows"), std::string::npos);
}

}  // namespace
}  // namespace headroom::calibrate
