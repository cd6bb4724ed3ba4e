// records_test.cpp: the schema registry, the envelope and the timeline's JSON form (probes/records/).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "planner/errors.hpp"
#include "probes/records/envelope.hpp"
#include "probes/records/schema.hpp"
#include "probes/records/timeline.hpp"

namespace headroom::records {
namespace {

std::string error_of(const nlohmann::json& doc, kind k) {
  try {
    require(doc, k, "doc.json");
  } catch (const bad_input& e) {
    return e.what();
  }
  return "";
}

TEST(Schema, ParsesTheGrammarAndRefusesAnythingElse) {
  const auto v = parse("headroom.measurement/1.5");
  ASSERT_TRUE(v);
  EXPECT_EQ(v->kind, "measurement");
  EXPECT_EQ(v->major, 1);
  EXPECT_EQ(v->minor, 5);
  const auto w = parse("headroom.plan/2");
  ASSERT_TRUE(w);
  EXPECT_EQ(w->minor, 0);
  for (const char* bad : {"", "headroom.", "headroom./1", "headroom.x/", "headroom.x/a", "headroom.x/1.",
                          "headroom.x/1.2.3", "other.x/1", "headroom.x/-1", "headroom.x/99999999"})
    EXPECT_FALSE(parse(bad)) << bad;
  EXPECT_EQ(to_string({"plan", 2, 0}), "headroom.plan/2");
  EXPECT_EQ(to_string({"trace", 1, 2}), "headroom.trace/1.2");
}

TEST(Schema, RequireAcceptsEveryMinorOfItsMajorAndNamesWhatItReads) {
  EXPECT_EQ(require(nlohmann::json{{"schema", "headroom.trace/1"}}, kind::trace, "t").minor, 0);
  EXPECT_EQ(require(nlohmann::json{{"schema", "headroom.trace/1.9"}}, kind::trace, "t").minor, 9);
  const auto major = error_of({{"schema", "headroom.trace/2.0"}}, kind::trace);
  EXPECT_NE(major.find("unsupported version 'headroom.trace/2.0'"), std::string::npos) << major;
  EXPECT_NE(major.find("headroom.trace/1.x"), std::string::npos) << major;
  EXPECT_NE(error_of({{"schema", "headroom.plan/2"}}, kind::trace).find("not a headroom.trace document"),
            std::string::npos);
  EXPECT_NE(error_of({{"schema", 3}}, kind::calibration).find("no schema"), std::string::npos);
  EXPECT_NE(error_of(nlohmann::json::array(), kind::calibration).find("no schema"), std::string::npos);
}

TEST(Schema, EveryKindWritesAVersionItsOwnReaderAccepts) {
  for (kind k : {kind::plan, kind::suggest, kind::min_gpus, kind::plan_max_fit, kind::trace, kind::measurement, kind::overheads,
                 kind::max_fit, kind::multi_rank, kind::snapshot_replay, kind::calibration,
                 kind::validation_pack, kind::validate, kind::torch_replay}) {
    const auto s = schema_of(k);
    ASSERT_TRUE(parse(s)) << s;
    EXPECT_EQ(parse(s)->kind, name_of(k));
    EXPECT_NO_THROW(require(nlohmann::json{{"schema", s}}, k, "x")) << s;
  }
}

TEST(Envelope, EveryDocumentBeginsTheSameWay) {
  const auto j = envelope(kind::plan);
  EXPECT_EQ(j["schema"], schema_of(kind::plan));
  EXPECT_EQ(j["tool"], "headroom");
  EXPECT_EQ(j["tool_version"], tool_version());
  EXPECT_EQ(j["git_revision"], git_revision());
  const std::string created = j["created"];
  EXPECT_EQ(created.size(), 20u);  // 2026-12-01T08:00:00Z
  EXPECT_EQ(created.back(), 'Z');
  // A writer's own fields follow; its own "schema" cannot override the envelope's.
  const auto k = enveloped(kind::calibration, {{"schema", "forged/9"}, {"terms", 1}});
  EXPECT_EQ(k["schema"], schema_of(kind::calibration));
  EXPECT_EQ(k["terms"], 1);
}

TEST(Timeline, RoundTripsAndRefusesWhatNoReplayMakes) {
  timeline t;
  t.events = 10;
  t.columns = {{0, 4, 1, 2, 3}, {4, 10, 5, 6, 7}};
  t.phases = {{0, 2, "state"}, {2, 10, "forward"}};
  const auto back = timeline_from_json(timeline_to_json(t), "r");
  EXPECT_EQ(back.events, 10);
  ASSERT_EQ(back.columns.size(), 2u);
  EXPECT_EQ(back.columns[1].reserved, 7);
  EXPECT_EQ(back.phases[1].phase, "forward");
  const auto svg = timeline_svg(back, std::int64_t{8} << 30, "case; allocator");
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("capacity 8"), std::string::npos);
  auto bad = [](const char* text) {
    EXPECT_THROW(timeline_from_json(nlohmann::json::parse(text), "r"), bad_input) << text;
  };
  bad(R"({"events": 10, "columns": [[4, 2, 0, 0, 0]], "phases": []})");                   // end before first
  bad(R"({"events": 10, "columns": [[0, 11, 0, 0, 0]], "phases": []})");                  // past the events
  bad(R"({"events": 10, "columns": [[0, 5, -1, 0, 0]], "phases": []})");                  // negative bytes
  bad(R"({"events": 10, "columns": [[0, 5, 0, 0]], "phases": []})");                      // too short
  bad(R"({"events": 10, "columns": [], "phases": [[0, 5, "sideways"]]})");                // unknown phase
  bad(R"({"events": 10, "columns": [[5, 9, 0, 0, 0], [0, 4, 0, 0, 0]], "phases": []})");  // out of order
  bad(R"({"events": -1, "columns": [], "phases": []})");
  bad(R"([1, 2])");
}

}  // namespace
}  // namespace headroom::records
