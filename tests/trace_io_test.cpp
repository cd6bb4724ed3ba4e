// trace_io_test.cpp: traces round-trip through JSON; malformed trace files are one clear error.
#include "probes/trace/trace_io.hpp"
#include "probes/records/envelope.hpp"

#include <nlohmann/json.hpp>
#include <gtest/gtest.h>

#include <sstream>

#include "planner/errors.hpp"
#include "planner/model_files.hpp"
#include "test_support.hpp"

namespace headroom::probes {
namespace {

std::string error_of(const std::string& text) {
  try {
    trace_from_json(nlohmann::json::parse(text), "t.json");
  } catch (const bad_input& e) {
    return e.what();
  }
  return "";
}

TEST(TraceIo, RoundTrip) {
  const problem p = test::preset_problem("gpt3-1.3b");
  layout l;
  l.gpus = 4;
  l.zero = 3;
  l.recompute = recompute_mode::selective;
  auto t = build_trace(p, l, 0);
  auto back = trace_from_json(trace_to_json(t), "round-trip");
  ASSERT_EQ(back.events.size(), t.events.size());
  ASSERT_EQ(back.tensors.size(), t.tensors.size());
  EXPECT_EQ(trace_peak(back).bytes, trace_peak(t).bytes);
  EXPECT_EQ(back.tensors[5].name, t.tensors[5].name);
  EXPECT_EQ(back.events[7].when, t.events[7].when);
}

TEST(TraceIo, StreamedTextIsTheDocumentsDump) {
  // The streamed writer must produce the very text of the DOM's dump(): same keys, order, escaping.
  const problem p = test::preset_problem("gpt3-1.3b");
  layout l;
  l.gpus = 4;
  l.zero = 1;
  auto t = build_trace(p, l, 0);
  t.model = "quote \" backslash \\ tab \t unicode \xc3\xa9";
  t.capacity = std::int64_t{141} << 30;
  t.events[3].stream = 7;
  t.events.push_back({event_kind::empty_cache, phase::backward, -1, 0});
  t.tensors[2].shape.clear();
  // One envelope for both, so the creation time cannot differ between them.
  const auto envelope = records::envelope(records::kind::trace);
  std::ostringstream streamed;
  write_trace_json(streamed, t, envelope);
  EXPECT_EQ(streamed.str(), trace_to_json(t, envelope).dump());
  step_trace empty;
  std::ostringstream none;
  write_trace_json(none, empty, envelope);
  EXPECT_EQ(none.str(), trace_to_json(empty, envelope).dump());
}

TEST(TraceIo, MalformedTracesNameTheProblem) {
  const std::string head =
      R"({"schema": "headroom.trace/1", "tensors": [{"name": "x", "bytes": 8}], "events": )";
  EXPECT_NE(error_of(head + R"([["free", 0, "forward"]]})").find("frees tensor 'x', which is not allocated"),
            std::string::npos);
  EXPECT_NE(error_of(head + R"([["alloc", 0, "forward"], ["alloc", 0, "forward"]]})").find("twice"),
            std::string::npos);
  EXPECT_NE(error_of(head + R"([["alloc", 3, "forward"]]})").find("does not exist"), std::string::npos);
  EXPECT_NE(error_of(head + R"([["alloc", 0, "sideways"]]})").find("unknown phase"), std::string::npos);
  EXPECT_NE(error_of(head + R"([["alloc"]]})").find("expected"), std::string::npos);
  EXPECT_NE(error_of(R"({"schema": "headroom.trace/2", "tensors": [], "events": []})").find("unsupported"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"schema": "other"})").find("not a headroom.trace document"), std::string::npos);
  EXPECT_NE(
      error_of(R"({"schema": "headroom.trace/1", "tensors": [{"name": "x", "bytes": -1}], "events": []})")
          .find("bytes"),
      std::string::npos);
}

}  // namespace
}  // namespace headroom::probes
