// validation_test.cpp: `headroom validate`'s library (calibrate/validation.hpp): the shipped pack agrees row
// by row, each row cited and given in the canonical problem JSON form; its out-of-memory rows are many and
// encode what the papers print (Korthikanti et al.'s Table 3 per activation mode, checked against the paper's
// text here, not against the planner); a contradiction is a disagreement with its reason; a malformed pack or
// row is bad input naming it.
#include "calibrate/validation.hpp"

#include <gtest/gtest.h>

#include <set>

#include "planner/errors.hpp"
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
  ASSERT_EQ(results.size(), 81u);
  // Two published outcomes the planner gets wrong today (docs/validation.md, "Disagreements"): kept in the
  // pack, named here so that a third, or one of these turning, is seen.
  const std::set<std::string> known = {
      "narayanan ZeRO-3 529.6B on 640 A100 80GB, micro-batch 4: fits",
      "narayanan figure 17: 145.6B on 128 A100 80GB, batch 16, none recompute: OOM"};
  EXPECT_EQ(disagreements(results), 2);
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
  EXPECT_EQ(out["rows"].size(), 81u);
  EXPECT_EQ(out["disagreements"], 2);
  EXPECT_TRUE(out["rows"][0].contains("relative_error"));
}

// Returns the shipped pack's row called `id`, or null.
nlohmann::json shipped_row(const nlohmann::json& pack, const std::string& id) {
  for (const auto& r : pack["rows"])
    if (r["id"] == id) return r;
  return nullptr;
}

// A planner that always answered "fits" must fail the pack: it holds the out-of-memory outcomes the sources
// publish (Korthikanti et al. 12, Narayanan et al. 2, ZeRO 1, llm-foundry 1, torchtitan 1), and every outcome
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
  EXPECT_EQ(oom, 17);
  EXPECT_EQ(trained, 44);
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

}  // namespace
}  // namespace headroom::calibrate
