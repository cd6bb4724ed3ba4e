// observe_contradictions_test.cpp: measurements `headroom observe` refuses to write because they contradict
// each other or the GPU they name (calibrate/observations.hpp: check_observations_agree,
// check_observation_device), through the built binary: rows of one run whose allocated peak is above the
// reserved peak or the device-used figure, or whose device-used figure is below the reserved peak; a device
// total (--gpu-mem, a problem object's capacity) or a figure that disagrees with the GPU type's capacity
// (planner/gpu_types.hpp); a gpu cell that cannot be the problem's --gpu-type. Each is one line naming the
// file, row and both figures, exit 2, nothing written; the consistent variants next to them are written.
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_support.hpp"

namespace {

namespace fs = std::filesystem;

const std::string contra_run = "--preset llama3-8b --gpus 8 --zero 3 --seq 8192 --recompute full";

// Runs `headroom observe` on a table holding `text` (CSV, or JSON when `name` ends in .json) in the fresh
// folder `tag`; returns the result and sets `out` to the folder observe was asked to write.
result contra_observe(const std::string& tag, const std::string& name, const std::string& text,
                      std::string& out) {
  const std::string dir = fresh_dir("contra_" + tag);
  std::ofstream(dir + "/" + name) << text;
  out = dir + "/out";
  return run("observe " + dir + "/" + name + " -o " + out);
}

// Expects the table `text` refused: exit 2, one line holding every one of `parts`, nothing written.
void contra_refused(const std::string& tag, const std::string& text, std::initializer_list<std::string> parts,
                    const std::string& name = "runs.csv") {
  std::string out;
  const auto r = contra_observe(tag, name, text, out);
  EXPECT_EQ(r.status, 2) << tag << ": " << r.out << r.err;
  EXPECT_EQ(r.out, "") << tag;
  EXPECT_EQ(lines(r.err), 1) << tag << ": " << r.err;
  for (const auto& p : parts)
    EXPECT_NE(r.err.find(p), std::string::npos) << tag << ": missing '" << p << "' in " << r.err;
  EXPECT_FALSE(fs::exists(out)) << tag;
}

// Expects the table `text` written: exit 0 and `records` record files.
void contra_written(const std::string& tag, const std::string& text, int records,
                    const std::string& name = "runs.csv") {
  std::string out;
  const auto r = contra_observe(tag, name, text, out);
  ASSERT_EQ(r.status, 0) << tag << ": " << r.err;
  int n = 0;
  for (const auto& e : fs::directory_iterator(out)) n += e.path().extension() == ".json";
  EXPECT_EQ(n, records) << tag;
}

const std::string contra_head = "name,problem,figure,value,unit\n";

// Returns the row "NAME,contra_run FLAGS,FIGURE,VALUE,UNIT".
std::string contra_row(const std::string& name, const std::string& figure, const std::string& value,
                       const std::string& unit, const std::string& flags = "") {
  return name + "," + contra_run + (flags.empty() ? "" : " " + flags) + "," + figure + "," + value + "," +
         unit + "\n";
}

}  // namespace

// Within one run the allocator hands out only what it reserved: an allocated peak above the reserved peak of
// the same problem in the same environment is refused at the later row, in either order, in any units, in a
// JSON table too. Within the rounding the values were given to, of another problem (micro-batch), or of
// another environment (allocator settings, software), the rows are not one run's and are written.
TEST(ObserveContradictions, AllocatedPeakAboveTheReservedPeakOfTheSameRun) {
  contra_refused("alloc_after",
                 contra_head + contra_row("r", "reserved_peak", "30.2", "GiB") +
                     contra_row("a", "allocated_peak", "31.5", "GiB"),
                 {"runs.csv: row 2, column 'value': allocated_peak 31.5 GiB is above the reserved_peak 30.2 "
                  "GiB of row 1",
                  "same problem, same environment", "the allocator hands out only what it reserved"});
  contra_refused("alloc_before",
                 contra_head + contra_row("a", "allocated_peak", "31.5", "GiB") +
                     contra_row("other", "reserved_peak", "40", "GiB", "--micro-batch 2") +
                     contra_row("r", "reserved_peak", "30200", "MiB"),
                 {"runs.csv: row 3, column 'value': reserved_peak 30200 MiB is below the allocated_peak 31.5 "
                  "GiB of row 1"});
  // Bytes against decimal gigabytes: 34 GB is 31.66 GiB, above 30.2 GiB.
  contra_refused(
      "alloc_units",
      contra_head + contra_row("r", "reserved_peak", "30.2", "GiB") +
          contra_row("a", "allocated_peak", "34", "GB"),
      {"row 2, column 'value': allocated_peak 34 GB is above the reserved_peak 30.2 GiB of row 1"});
  // The same runs as JSON.
  const nlohmann::json runs = {{"runs",
                                {{{"name", "r"},
                                  {"problem", contra_run},
                                  {"figure", "reserved_peak"},
                                  {"value", 30.2},
                                  {"unit", "GiB"}},
                                 {{"name", "a"},
                                  {"problem", contra_run},
                                  {"figure", "allocated_peak"},
                                  {"value", 31.5},
                                  {"unit", "GiB"}}}}};
  contra_refused("alloc_json", runs.dump(),
                 {"runs.json: row 2, column 'value': allocated_peak 31.5 GiB is above"}, "runs.json");
  // Written: equal within the rounding of "30.2" (+-0.05 GiB); another problem; another allocator setting or
  // software version (not one run); a fourth row that only repeats a consistent figure.
  contra_written("alloc_rounding",
                 contra_head + contra_row("r", "reserved_peak", "30.2", "GiB") +
                     contra_row("a", "allocated_peak", "30.24", "GiB"),
                 2);
  contra_written("alloc_other_problem",
                 contra_head + contra_row("r", "reserved_peak", "30.2", "GiB") +
                     contra_row("a", "allocated_peak", "35", "GiB", "--micro-batch 2"),
                 2);
  contra_written("alloc_other_env",
                 "name,problem,figure,value,unit,allocator,software\n"
                 "r," +
                     contra_run +
                     ",reserved_peak,30.2,GiB,expandable_segments:True,torch 2.6\n"
                     "a," +
                     contra_run +
                     ",allocated_peak,31.5,GiB,,torch 2.6\n"
                     "b," +
                     contra_run + ",allocated_peak,31.5,GiB,expandable_segments:True,torch 2.7\n",
                 3);
}

// The device's used memory holds the allocator's segments and every allocated byte: a device-used figure
// below the reserved or the allocated peak of the same run is refused, naming both rows' figures; above
// both it is written.
TEST(ObserveContradictions, DeviceUsedBelowThePeaksOfTheSameRun) {
  contra_refused(
      "used_below_reserved",
      contra_head + contra_row("u", "device_used", "29000", "MiB") +
          contra_row("r", "reserved_peak", "30.2", "GiB"),
      {"runs.csv: row 2, column 'value': reserved_peak 30.2 GiB is above the device_used 29000 MiB of row 1",
       "the device's used memory holds the reserved segments"});
  contra_refused("used_below_allocated",
                 contra_head + contra_row("a", "allocated_peak", "30.0", "GiB") +
                     contra_row("u", "device_used", "29.5", "GiB"),
                 {"row 2, column 'value': device_used 29.5 GiB is below the allocated_peak 30.0 GiB of row 1",
                  "holds every allocated byte"});
  // Three rows: the contradiction is between the first and the third, named at the third.
  contra_refused(
      "used_third",
      contra_head + contra_row("r", "reserved_peak", "30.2", "GiB") +
          contra_row("a", "allocated_peak", "28", "GiB") + contra_row("u", "device_used", "30000", "MiB"),
      {"row 3, column 'value': device_used 30000 MiB is below the reserved_peak 30.2 GiB of row 1"});
  contra_written("used_consistent",
                 contra_head + contra_row("r", "reserved_peak", "30.2", "GiB") +
                     contra_row("a", "allocated_peak", "28", "GiB") +
                     contra_row("u", "device_used", "31400", "MiB"),
                 3);
}

// A row states its GPU twice, by the gpu cell and by the problem's device (--gpu-type, --gpu-mem, a problem
// object's device.capacity_bytes). A total that disagrees with the GPU type's capacity beyond 5%, a gpu cell
// that cannot be the --gpu-type, a figure above the named GPU's memory: refused naming both figures or both
// GPUs. A nominal total within 5%, a GPU the types table does not know, a name that may be either H100:
// written.
TEST(ObserveContradictions, DeviceTotalThatDisagreesWithTheGpu) {
  const std::string head = "name,problem,figure,value,unit,gpu\n";
  auto row = [](const std::string& flags, const std::string& gpu, const std::string& gib = "30.2") {
    return "r," + contra_run + (flags.empty() ? "" : " " + flags) + ",reserved_peak," + gib + ",GiB," + gpu +
           "\n";
  };
  contra_refused(
      "total_gpu_mem", head + row("--gpu-mem 40", "NVIDIA H100 80GB HBM3"),
      {"runs.csv: row 1, column 'problem': the device total 40.00 GiB (--gpu-mem) disagrees with the 79.65 "
       "GiB of 'NVIDIA H100 80GB HBM3', h100-80gb"});
  // GB taken for GiB: 80 GB is 74.51 GiB, 6.5% below the H100's 79.65.
  contra_refused(
      "total_decimal", head + row("--gpu-type h100-80gb --gpu-mem 80GB", ""),
      {"row 1, column 'problem': the device total 74.51 GiB (--gpu-mem) disagrees with the 79.65 GiB of "
       "h100-80gb"});
  contra_refused(
      "total_other_card", head + row("--gpu-mem 80", "NVIDIA H200"),
      {"the device total 80.00 GiB (--gpu-mem) disagrees with the 140.40 GiB of 'NVIDIA H200', h200-141gb"});
  contra_refused("gpu_not_type", head + row("--gpu-type h100-80gb", "NVIDIA A100-SXM4-40GB"),
                 {"runs.csv: row 1, column 'gpu': 'NVIDIA A100-SXM4-40GB' cannot be the problem's --gpu-type "
                  "h100-80gb"});
  contra_refused(
      "figure_above_gpu", head + row("", "NVIDIA H100 80GB HBM3", "95"),
      {"row 1, column 'value': reserved_peak 95 GiB is above the 79.65 GiB of 'NVIDIA H100 80GB HBM3'"});
  // A problem object states its total in device.capacity_bytes: the default 192 GiB is not an H200's.
  std::string out;
  ASSERT_EQ(contra_observe("object_source", "runs.csv",
                           contra_head + contra_row("r", "reserved_peak", "30.2", "GiB"), out)
                .status,
            0);
  const auto rec = nlohmann::json::parse(slurp(out + "/r.json"));
  nlohmann::json problem = rec["inputs"];
  problem["layout"] = problem["layout_spec"];
  for (const char* k : {"tool", "predicted", "layout_spec"}) problem.erase(k);
  const nlohmann::json runs = {{"runs",
                                {{{"name", "r"},
                                  {"problem", problem},
                                  {"figure", "reserved_peak"},
                                  {"value", 30.2},
                                  {"unit", "GiB"},
                                  {"gpu", "NVIDIA H200"}}}}};
  contra_refused(
      "object_total", runs.dump(),
      {"runs.json: row 1, column 'problem': the device total 192.00 GiB (device.capacity_bytes) disagrees "
       "with the 140.40 GiB of 'NVIDIA H200'"},
      "runs.json");
  nlohmann::json h200 = runs;
  h200["runs"][0]["problem"]["device"]["capacity_bytes"] = std::int64_t{143771} << 20;
  contra_written("object_h200", h200.dump(), 1, "runs.json");
  // Written: a nominal 80 GiB for the 79.65 GiB card; the type alone; a GPU the table does not know; a name
  // that may be the 80 or the 94 GB H100 with the 94 GB's total; no gpu cell and the default total.
  contra_written("total_agrees",
                 head + row("--gpu-mem 80", "NVIDIA H100 80GB HBM3") +
                     row("--gpu-type h100-80gb", "NVIDIA H100 80GB HBM3").replace(0, 1, "t") +
                     row("--gpu-mem 48", "NVIDIA RTX 6000 Ada Generation").replace(0, 1, "u") +
                     row("--gpu-mem 94", "NVIDIA H100").replace(0, 1, "v") + row("", "").replace(0, 1, "w"),
                 5);
}
