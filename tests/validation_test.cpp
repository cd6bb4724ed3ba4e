// validation_test.cpp: `headroom validate`'s library (calibrate/validation.hpp): the shipped pack agrees row
// by row, each row cited and given in the canonical problem JSON form; a contradiction is a disagreement
// with its reason; a malformed pack or row is bad input naming it.
#include "calibrate/validation.hpp"

#include <gtest/gtest.h>

#include "planner/errors.hpp"
#include "planner/model_files.hpp"
#include "planner/problem_json.hpp"
#include "test_support.hpp"
#include "probes/records/schema.hpp"

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

TEST(Validation, ShippedPackAgreesAndEveryRowIsCitedInProblemJsonForm) {
  const std::string path = default_validation_pack();
  const nlohmann::json pack = read_json_file(path);
  const auto results = validate_pack(pack, path);
  ASSERT_EQ(results.size(), 44u);
  EXPECT_EQ(disagreements(results), 0);
  for (const auto& r : results) {
    EXPECT_TRUE(r.agrees) << r.id << ": " << r.why;
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
  EXPECT_EQ(out["rows"].size(), 44u);
  EXPECT_EQ(out["disagreements"], 0);
  EXPECT_TRUE(out["rows"][0].contains("relative_error"));
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
  EXPECT_NE(refusal({{"schema", "other"}, {"rows", nlohmann::json::array()}}).find("not a headroom.validation document"),
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
