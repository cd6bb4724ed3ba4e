// observe_command.cpp: `headroom observe` (see observe_command.hpp). Parsing and printing only: the table
// and the records are calibrate/observations.cpp's; each row's problem is parsed by `headroom plan`'s own
// options (plan_command.hpp), so a row says what a plan command line says.
#include "observe_command.hpp"

#include <algorithm>
#include <filesystem>
#include <iostream>

#include "calibrate/compare.hpp"
#include "calibrate/observations.hpp"
#include "exit_codes.hpp"
#include "launch_options.hpp"
#include "option_checks.hpp"
#include "plan_command.hpp"
#include "planner/errors.hpp"
#include "planner/estimate.hpp"
#include "planner/format.hpp"
#include "planner/gpu_types.hpp"
#include "planner/model_files.hpp"
#include "planner/problem_json.hpp"
#include "probes/io/results_file.hpp"
#include "record_files.hpp"

namespace headroom::cli {

CLI::App* add_observe_command(CLI::App& app, observe_options& o) {
  auto* c = app.add_subcommand(
      "observe",
      "Turn a table of measured runs (CSV or JSON: problem, figure, value, unit, ...) into records");
  c->add_option("table", o.table, "RUNS.csv or RUNS.json (docs/calibrating.md)")->required();
  c->add_option("-o,--out", o.out, "Directory to write one observation record per run into")->required();
  c->add_flag("--force", o.force, "Replace record files that exist");
  return c;
}

namespace {

// A row's run: its problem and layout, and what stated the device total ("" when it is the planner's default
// or the --gpu-type's own capacity; calibrate/observations.hpp, check_observation_device).
struct observe_case {
  problem p;
  layout l;
  std::string total_from;
};

// Returns the run of a row given as `headroom plan` flags or as a problem object; adds the files its flags
// read to `files`. Throws bad_input naming the cell.
observe_case observe_row_case(const calibrate::observation_row& r, const std::string& origin,
                              std::vector<std::string>& files) {
  const std::string where = calibrate::cell_where(origin, r.row, "problem");
  if (!r.problem.is_null()) {
    if (!r.problem.is_object() || !r.problem.contains("layout"))
      throw bad_input(where, "a problem object needs model, recipe, training, device and layout");
    nlohmann::json pj = r.problem;
    const nlohmann::json lj = pj["layout"];
    pj.erase("layout");
    try {
      problem p = problem_from_json(pj, where);
      layout l = layout_from_json(lj, where + ".layout");
      (void)estimate(p, l);  // validates the layout against the model
      return {p, l, "device.capacity_bytes"};
    } catch (const bad_input& e) {
      throw bad_input(where, e.what());
    }
  }
  CLI::App app{"observe row"};
  plan_options po;
  add_problem_options(&app, po);
  if (auto empty_item = empty_list_item(app, CLI::detail::split_up(r.flags)))
    throw bad_input(where, empty_item->what());
  try {
    app.parse(r.flags, false);
  } catch (const CLI::Success&) {  // --help or --version: asks for text, describes no run
    throw bad_input(where, "--help and --version describe no run: give `headroom plan` flags of the run");
  } catch (const CLI::ParseError& e) {
    // A mistyped option: its nearest spelling, as the command line's own refusal gives it (cli/main.cpp).
    const std::vector<std::string> options = option_names(app);
    std::string near;
    for (std::size_t at = r.flags.find("--"); near.empty() && at != std::string::npos;
         at = r.flags.find("--", at + 2)) {
      const std::string word = r.flags.substr(at, r.flags.find(' ', at) - at);
      if (const std::string best = meant_option(word, options); !best.empty())
        near = " (did you mean '" + best + "' for '" + printable(word.substr(0, word.find('=')), 40) + "'?)";
    }
    throw bad_input(where, std::string("not `headroom plan` flags: ") + printable(e.what(), 200) + near);
  }
  // A row whose flags name no GPU is planned on the one its gpu cell names, when the cell can be only one
  // type (planner/gpu_types.hpp device_name_may_be): its capacity, not the 192 GiB default.
  if (po.gpu_type.empty() && !given(po, "--gpu-mem") && !r.gpu.empty()) {
    std::vector<std::string> types;
    for (const auto& t : gpu_types())
      if (device_name_may_be(r.gpu, t)) types.emplace_back(t.name);
    if (types.size() == 1) po.gpu_type = types.front();
  }
  for (auto& f : problem_input_files(po)) files.push_back(std::move(f));
  try {
    // A launch file in the row (--megatron-args, --torchtitan-config, --deepspeed-config) is read as `plan`
    // reads it (cli/launch_options.hpp): its values fill what the row's flags do not state.
    (void)apply_imports(po);
    po.imports_applied = true;
    problem p = problem_from(po);
    layout l = layout_from(po);
    (void)estimate(p, l);
    return {p, l, given(po, "--gpu-mem") ? "--gpu-mem" : ""};
  } catch (const bad_input& e) {
    throw bad_input(where, e.what());
  }
}

}  // namespace

int run_observe(const observe_options& o) {
  const std::string origin = shown_name(o.table);
  const std::string text = read_regular_file(o.table, max_json_file_bytes, "a table of runs");
  const bool is_json = o.table.size() >= 5 && o.table.compare(o.table.size() - 5, 5, ".json") == 0;
  const auto rows = is_json ? calibrate::observations_from_json(parse_json_text(text, origin), origin)
                            : calibrate::observations_from_csv(text, origin);
  const std::string command = "headroom observe " + o.table + " -o " + o.out + (o.force ? " --force" : "");
  // Every row is read and predicted before anything is written: one bad row, no records.
  std::vector<std::pair<std::string, std::string>> records;
  std::vector<std::string> inputs{o.table};  // no record may overwrite what the rows read
  std::vector<std::string> cases;            // each row's run, to check rows of one run against each other
  for (const auto& r : rows) {
    const auto [p, l, total_from] = observe_row_case(r, origin, inputs);
    calibrate::check_observation_device(r, p, total_from, origin);
    calibrate::check_observation_floor(r, p, l, origin);
    cases.push_back(calibrate::problem_case(p, l).dump());
    const std::string path = (std::filesystem::path(o.out) / (r.name + ".json")).string();
    for (const auto& [other, _] : records)
      if (other == path)
        throw bad_input(calibrate::cell_where(origin, r.row, "name"), "'" + r.name + "' names two runs");
    records.emplace_back(path, calibrate::observation_record(r, p, l, command).dump(2) + "\n");
  }
  calibrate::check_observations_agree(rows, cases, origin);
  std::error_code ec;
  const bool existed = std::filesystem::exists(o.out, ec);
  if (existed && !std::filesystem::is_directory(o.out, ec))
    throw bad_input(in_quotes(o.out), "is not a directory");
  if (!existed && (!std::filesystem::create_directories(o.out, ec) || ec))
    throw bad_input(in_quotes(o.out), "cannot be created (" + ec.message() + ")");
  try {
    probes::output_set outs(o.force, &std::cout);
    for (const auto& f : inputs) outs.input(f);
    for (const auto& [path, _] : records) outs.expect(path);
    for (const auto& [path, doc] : records) outs.add(path, doc);
    outs.commit();
  } catch (...) {
    if (!existed) std::filesystem::remove(o.out, ec);  // the directory this run made, left empty
    throw;
  }
  std::cout << "headroom observe: " << rows.size() << " run(s) from " << printable(origin) << " -> "
            << printable(o.out) << "\n";
  for (const auto& r : rows)
    std::cout << "  " << printable(r.name) << ": " << calibrate::figure_name(r.figure) << " "
              << gib_text(static_cast<double>(r.bytes)) << " (" << printable(r.as_given, 40) << ")\n";
  return exit_fits;
}

}  // namespace headroom::cli
