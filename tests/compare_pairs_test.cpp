// compare_pairs_test.cpp: how `headroom compare` pairs records (calibrate/compare.hpp, case_of), through the
// built binary on records `headroom observe` writes: records of another micro-batch, sequence, recompute,
// attention, recipe, layout or GPU are never one case (listed as unpaired, and a comparison that pairs
// nothing is refused); a set compared with itself, however given, is a baseline check that moves nothing;
// several records of one case pair by file name; cases that share a label are told apart in it.
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_support.hpp"

namespace {

namespace fs = std::filesystem;

// The run every record of these tests is a variant of (well above its state floor, below any GPU's memory),
// option by option.
const std::vector<std::pair<std::string, std::string>> pairs_run = {
    {"--preset", "llama3-8b"}, {"--gpus", "8"}, {"--zero", "3"}, {"--seq", "8192"}, {"--recompute", "full"}};

// Returns the run's flags with `flags` ("--seq 4096", one option and its value, or "") in place of the run's
// own value of that option, or added.
std::string pairs_problem(const std::string& flags) {
  const auto space = flags.find(' ');
  const std::string name = flags.substr(0, space);
  std::string out;
  bool replaced = false;
  for (const auto& [option, value] : pairs_run) {
    const bool here = option == name;
    out += (out.empty() ? "" : " ") + option + " " + (here ? flags.substr(space + 1) : value);
    replaced = replaced || here;
  }
  return replaced || flags.empty() ? out : out + " " + flags;
}

// Writes one observation record per `rows` entry ("NAME,PROBLEM,FIGURE,VALUE,UNIT") into the fresh folder
// `tag`, through `headroom observe`; returns the folder.
std::string pairs_records(const std::string& tag, const std::vector<std::string>& rows) {
  const std::string dir = fresh_dir("pairs_" + tag);
  std::string csv = "name,problem,figure,value,unit,gpu,driver\n";
  for (const auto& r : rows) csv += r + ",NVIDIA H100 80GB HBM3,550.90.07\n";
  const std::string table = scratch("pairs_" + tag + ".csv");
  std::ofstream(table) << csv;
  const auto r = run("observe " + table + " -o " + dir + "/records");
  EXPECT_EQ(r.status, 0) << r.err;
  return dir + "/records";
}

// Returns the row "NAME,PROBLEM,reserved_peak,GIB,GiB" of the run with `flags` (pairs_problem).
std::string pairs_row(const std::string& name, const std::string& flags, const std::string& gib) {
  return name + "," + pairs_problem(flags) + ",reserved_peak," + gib + ",GiB";
}

// Expects `r` refused as bad input with one line holding every one of `parts`.
void pairs_refused(const result& r, std::initializer_list<std::string> parts) {
  EXPECT_EQ(r.status, 2) << r.out << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(lines(r.err), 1) << r.err;
  for (const auto& p : parts)
    EXPECT_NE(r.err.find(p), std::string::npos) << "missing '" << p << "' in " << r.err;
}

}  // namespace

// The example and its class: a baseline at micro-batch 1 against a new set of the same model at
// micro-batch 2 (+66% reserved) is no regression of the environment but another problem. For every field of
// the problem or layout that changes a run's memory, records that differ in it alone pair with nothing: the
// comparison compares nothing and is refused (exit 2), naming the field and both values; never a REGRESSION.
TEST(ComparePairs, RecordsOfAnotherProblemAreNeverOneCase) {
  const struct {
    const char* flags;
    const char* named;  // the field the refusal names, baseline -> new
  } variants[] = {
      {"--micro-batch 2", "training.micro_batch 1 -> 2"},
      {"--seq 4096", "training.seq 8192 -> 4096"},
      {"--recompute selective", "layout.recompute full -> selective"},
      {"--attention flash", "training.attention eager -> flash"},
      {"--recipe fp32-adam", "recipe."},
      {"--tp 2", "layout."},
      {"--zero 2", "layout.zero 3 -> 2"},
      {"--global-batch 64", "training.global_batch"},
      // (Without --gpu-type the gpu cell's H100 80GB HBM3 is planned as h100-80gb: another total is another run.)
      {"--gpu-mem 80", "device.capacity_bytes"},
  };
  const std::string base = pairs_records("base", {pairs_row("run", "", "30.0")});
  int i = 0;
  for (const auto& v : variants) {
    std::string tag = "v";  // appended, not `"v" + std::string`: GCC 12's -Wrestrict (bug 105651)
    tag.append(std::to_string(i++));
    const std::string fresh = pairs_records(tag, {pairs_row("run", v.flags, "49.8")});
    const auto r = run("compare " + base + " " + fresh);
    pairs_refused(r, {"compare: no record of", "nothing was compared",
                      "records pair by their whole problem and layout", v.named});
    EXPECT_EQ(r.err.find("REGRESSION"), std::string::npos) << v.flags << ": " << r.err;
  }
  // The same figure of the same problem, +66%: that is a regression, and the gate says so.
  const std::string same = pairs_records("same", {pairs_row("run", "", "49.8")});
  const auto r = run("compare " + base + " " + same);
  EXPECT_EQ(r.status, 6) << r.out << r.err;
  EXPECT_NE(r.out.find("REGRESSION peak reserved (observed): 30.000 GiB -> 49.800 GiB"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("seq 8192 micro-batch 1 reserved_peak]"), std::string::npos) << r.out;
}

// In a mixed set, what pairs is compared and the rest is listed as unpaired with the nearest case on the
// other side and what differs: micro-batch 1 is never compared with micro-batch 4, nor a reserved peak with a
// device-used figure of the same problem.
TEST(ComparePairs, RecordsWithNoPartnerAreListedNotCompared) {
  const std::string base =
      pairs_records("mixed_base", {pairs_row("mb1", "", "30.0"), pairs_row("mb2", "--micro-batch 2", "36.9"),
                                   "used," + pairs_problem("") + ",device_used,40,GiB"});
  const std::string fresh = pairs_records("mixed_new", {pairs_row("mb2", "--micro-batch 2", "38.2"),
                                                        pairs_row("mb4", "--micro-batch 4", "50.1")});
  const auto r = run("compare " + base + " " + fresh);
  EXPECT_EQ(r.status, 6) << r.out << r.err;
  // Exactly one figure: micro-batch 2's, +1.3 GiB.
  int figures = 0;
  for (std::size_t at = 0; (at = r.out.find("peak reserved (observed):", at)) != std::string::npos; ++at)
    ++figures;
  EXPECT_EQ(figures, 1) << r.out;
  EXPECT_NE(r.out.find("REGRESSION peak reserved (observed): 36.900 GiB -> 38.200 GiB"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("micro-batch 2 reserved_peak]"), std::string::npos) << r.out;
  EXPECT_NE(
      r.out.find("only in the baseline, not compared: observation observation llama3-8b [tp=1 pp=1 dp=8, "
                 "ZeRO-3, recompute full] seq 8192 micro-batch 1 reserved_peak (nearest case in the new set, "
                 "baseline -> new: training.micro_batch 1 -> 4)"),
      std::string::npos)
      << r.out;
  EXPECT_NE(
      r.out.find("only in the baseline, not compared: observation observation llama3-8b [tp=1 pp=1 dp=8, "
                 "ZeRO-3, recompute full] seq 8192 micro-batch 1 device_used"),
      std::string::npos)
      << r.out;
  EXPECT_NE(
      r.out.find("only in the new set, not compared: observation observation llama3-8b [tp=1 pp=1 dp=8, "
                 "ZeRO-3, recompute full] seq 8192 micro-batch 4 reserved_peak"),
      std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("paired '"), std::string::npos) << r.out;  // no pairing by elimination of cases
}

// A record set compared with itself is a valid baseline check (a CI job's first run): allowed, nothing moves,
// exit 0, whether the same folder is given twice (in any spelling), the same file, or a copy. A folder with
// several records of one case (repeated runs) pairs them by file name.
TEST(ComparePairs, ASetComparedWithItselfMovesNothing) {
  const std::string dir =
      pairs_records("self", {pairs_row("mb1", "", "30.2"), pairs_row("mb2", "--micro-batch 2", "36.9"),
                             pairs_row("mb4", "--micro-batch 4", "50.1"),
                             // repeated runs of micro-batch 1: one case, two records
                             pairs_row("mb1-again", "", "30.6")});
  const std::string copy = fresh_dir("pairs_self_copy") + "/records";
  fs::copy(dir, copy);
  const struct {
    std::string baseline, fresh;
    bool same_files;
    int records;
  } variants[] = {
      {dir, dir, true, 4},
      {dir, dir + "/.", true, 4},
      {dir, dir + "/../records/", true, 4},
      {dir + "/mb2.json", dir + "/mb2.json", true, 1},
      {dir, copy, false, 4},
  };
  for (const auto& v : variants) {
    const auto r = run("compare " + v.baseline + " " + v.fresh);
    EXPECT_EQ(r.status, 0) << v.fresh << ": " << r.out << r.err;
    EXPECT_EQ(r.err, "");
    EXPECT_NE(r.out.find("headroom compare: " + std::to_string(v.records) + " baseline records, " +
                         std::to_string(v.records) + " new records"),
              std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find("nothing moved"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("the two sides state the same environment"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("only in the"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("REGRESSION"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("paired '"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("verdict: no regression: 0 figure(s) beyond the tolerance grew; 0 shrank beyond it"),
              std::string::npos)
        << r.out;
    EXPECT_EQ(r.out.find("the two sides are the same") != std::string::npos, v.same_files) << r.out;
  }
}

// Several records of one case on each side pair by file name: a regression in one repeated run is found and
// labelled with its file. Names that do not match on a side with two or more are refused, not guessed; one
// left on each side pairs and says so; a record of a case the other side has under another name alone is
// listed.
TEST(ComparePairs, RepeatedRunsOfOneCasePairByFileName) {
  const std::string base =
      pairs_records("rep_base", {pairs_row("run1", "", "30.2"), pairs_row("run2", "", "30.6")});
  const std::string fresh =
      pairs_records("rep_new", {pairs_row("run1", "", "30.2"), pairs_row("run2", "", "33.0")});
  auto r = run("compare " + base + " " + fresh);
  EXPECT_EQ(r.status, 6) << r.out << r.err;
  EXPECT_NE(r.out.find("REGRESSION peak reserved (observed): 30.600 GiB -> 33.000 GiB"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("micro-batch 1 reserved_peak (run2.json)]"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("(run1.json)]"), std::string::npos) << r.out;  // run1 did not move
  // Other names, two on a side: which is which would be a guess.
  const std::string other =
      pairs_records("rep_other", {pairs_row("x", "", "30.2"), pairs_row("y", "", "30.6")});
  pairs_refused(run("compare " + base + " " + other),
                {"the baseline set holds 2 records of one case", "run1.json' and '", "run2.json'",
                 "records of one case pair by file name"});
  // One left on each side once the rest paired by name: paired, and said to be.
  const std::string one_renamed =
      pairs_records("rep_renamed", {pairs_row("run1", "", "30.2"), pairs_row("z", "", "30.6")});
  r = run("compare " + base + " " + one_renamed);
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("(run2.json)' with '"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(z.json)' (the only records of their case on each side not paired by file name)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("nothing moved"), std::string::npos) << r.out;
  // A side with one of the two: run1 pairs, run2 is listed.
  const std::string fewer = pairs_records("rep_fewer", {pairs_row("run1", "", "30.2")});
  r = run("compare " + base + " " + fewer);
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("only in the baseline, not compared: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("reserved_peak (run2.json)"), std::string::npos) << r.out;
}

// Cases whose labels would read alike (the label names model, layout, sequence and micro-batch, not the
// attention or recipe) are told apart in every line by the fields in which they differ.
TEST(ComparePairs, CasesThatShareALabelAreToldApart) {
  const std::string base = pairs_records(
      "label_base", {pairs_row("eager", "", "30.0"), pairs_row("flash", "--attention flash", "40.0"),
                     pairs_row("fp32", "--recipe fp32-adam", "45.0")});
  const std::string fresh = pairs_records(
      "label_new", {pairs_row("eager", "", "30.0"), pairs_row("flash", "--attention flash", "44.0"),
                    pairs_row("fp32", "--recipe fp32-adam", "45.0")});
  const auto r = run("compare " + base + " " + fresh);
  EXPECT_EQ(r.status, 6) << r.out << r.err;
  EXPECT_EQ(lines(r.out), 6) << r.out;  // title, two environments, same environment, one figure, verdict
  const auto at = r.out.find("REGRESSION peak reserved (observed): 40.000 GiB -> 44.000 GiB");
  ASSERT_NE(at, std::string::npos) << r.out;
  const std::string line = r.out.substr(at, r.out.find('\n', at) - at);
  // The recipe by its name, not by its buffers' fields.
  EXPECT_NE(line.find("{recipe.name bf16-adam, training.attention flash}]"), std::string::npos) << line;
}
