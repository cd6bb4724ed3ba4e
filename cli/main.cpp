// main.cpp: the `headroom` command. Parses arguments, dispatches to a subcommand, and is the one place
// that turns errors into one line on stderr and an exit status (exit_codes.hpp).
#include <CLI/CLI.hpp>
#include <csignal>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "calibrate_command.hpp"
#include "exit_codes.hpp"
#include "plan_command.hpp"
#include "planner/errors.hpp"
#include "planner/model_files.hpp"
#include "probe_command.hpp"
#include "probes/devices/device.hpp"
#include "probes/cases/gpu_backend.hpp"
#include "probes/io/results_file.hpp"
#include "snapshot_command.hpp"
#include "tables.hpp"
#include "validate_command.hpp"
#include "probes/records/envelope.hpp"

namespace {

// Returns `s` as one line of at most 280 characters: control characters (a value with a newline) become
// spaces, and a long value (a 1 MB argument) is cut, so every error is one readable line.
std::string one_line(const std::string& s) {
  std::string o;
  for (char c : s) o.push_back(static_cast<unsigned char>(c) < 0x20 || c == 0x7f ? ' ' : c);
  if (o.size() > 280) o = o.substr(0, 277) + "...";
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace headroom;
  using namespace headroom::cli;
  // A write past a file-size limit fails with EFBIG instead of killing the process, so the temporary file
  // is removed and the error reported.
  std::signal(SIGXFSZ, SIG_IGN);
  CLI::App app{"headroom: will one training step fit in each GPU's memory, and with how much headroom"};
  app.require_subcommand(1);
  app.set_version_flag("--version", records::tool_version() + " (" + records::git_revision() + ")");
  plan_options plan;
  auto* plan_cmd = add_plan_command(app, plan);
  trace_options trace;
  auto* trace_cmd = add_trace_command(app, trace);
  probe_command_options probe;
  auto* probe_cmd = add_probe_command(app, probe);
  snapshot_options snapshot;
  auto* snapshot_cmd = add_snapshot_command(app, snapshot);
  calibrate_options cal;
  auto* calibrate_cmd = add_calibrate_command(app, cal);
  auto* compare_cmd = add_compare_command(app, cal);
  auto* report_cmd = add_report_command(app, cal);
  validate_options validate;
  auto* validate_cmd = add_validate_command(app, validate);
  for (int i = 0; i < argc; ++i) probe.command_line += (i ? " " : "") + std::string(argv[i]);
  auto* presets_cmd = app.add_subcommand("presets", "List the model presets");
  auto* recipes_cmd =
      app.add_subcommand("recipes", "List the precision recipes: bytes per parameter and what each shards");
  auto* context_cmd =
      app.add_subcommand("context-probe", "Internal: measure the CUDA context (for probe overheads)");
  context_cmd->group("");  // not listed in --help
  // The flag forms of `probe` that its subcommands replaced: one line naming the new form.
  if (auto moved = moved_probe_form(argc, argv)) {
    std::cerr << one_line(*moved) << "\n";
    return exit_bad_input;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::Success& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << one_line(std::string("headroom: ") + e.what() + " (run with --help for usage)") << "\n";
    return exit_bad_input;
  }
  try {
    if (recipes_cmd->parsed()) {
      write_recipes(std::cout);
      return exit_fits;
    }
    if (presets_cmd->parsed()) {
      for (const auto& n : list_presets(preset_dir())) std::cout << n << "\n";
      return exit_fits;
    }
    if (plan_cmd->parsed()) return run_plan(plan);
    if (validate_cmd->parsed()) return run_validate(validate);
    if (calibrate_cmd->parsed()) return run_calibrate(cal);
    if (compare_cmd->parsed()) return run_compare(cal);
    if (report_cmd->parsed()) return run_report(cal);
    if (snapshot_cmd->parsed()) return run_snapshot(snapshot);
    if (trace_cmd->parsed()) return run_trace(trace);
    if (probe_cmd->parsed()) return run_probe(probe);
    if (context_cmd->parsed()) {
      if (auto why = probes::cuda_unavailable_reason()) {
        std::cerr << "headroom: no CUDA device (" << *why << ")\n";
        return exit_no_device;
      }
      return run_context_probe();
    }
  } catch (const bad_input& e) {
    std::cerr << one_line(std::string("headroom: bad input: ") + e.what()) << "\n";
    return exit_bad_input;
  } catch (const nlohmann::json::exception& e) {
    // A JSON value of the wrong type deep inside an input file: the input's problem.
    std::cerr << one_line(std::string("headroom: bad input: unreadable JSON value (") + e.what() + ")")
              << "\n";
    return exit_bad_input;
  } catch (const probes::output_error& e) {
    std::cerr << one_line(std::string("headroom: cannot write output: ") + e.what()) << "\n";
    return exit_output_failed;
  } catch (const probes::device_error& e) {
    std::cerr << one_line(std::string("headroom: device error: ") + e.what()) << "\n";
    return exit_device_failed;
  } catch (const std::bad_alloc&) {
    std::cerr << "headroom: out of host memory (the input asks for more than this machine has)\n";
    return exit_bad_input;
  } catch (const std::exception& e) {
    std::cerr << one_line(std::string("headroom: internal error: ") + e.what()) << "\n";
    return exit_internal;
  }
  return exit_internal;
}
