// main.cpp: the `headroom` command. Parses arguments, dispatches to a subcommand, and is the one place
// that turns errors into one line on stderr and an exit status (exit_codes.hpp), and that checks standard
// output: what a command printed and the stream lost is an output failure, for every command alike.
#include <fcntl.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cctype>
#include <csignal>
#include <cstring>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>

#include "calibrate_command.hpp"
#include "observe_command.hpp"
#include "compare_command.hpp"
#include "exit_codes.hpp"
#include "one_line.hpp"
#include "option_checks.hpp"
#include "plan_command.hpp"
#include "planner/errors.hpp"
#include "planner/format.hpp"
#include "planner/json_fields.hpp"
#include "planner/model_files.hpp"
#include "probe_command.hpp"
#include "probes/cases/gpu_backend.hpp"
#include "probes/devices/device.hpp"
#include "probes/io/results_file.hpp"
#include "probes/records/envelope.hpp"
#include "report_command.hpp"
#include "snapshot_command.hpp"
#include "tables.hpp"
#include "validate_command.hpp"

namespace {

using namespace headroom;
using namespace headroom::cli;


// A standard stream that was closed when headroom started (`>&-`) is opened on /dev/null read-only, so a
// write to it fails (EBADF) and is reported, and no file the command opens can take its descriptor and
// receive what was meant for the terminal.
void keep_standard_descriptors() {
  for (int fd = 0; fd <= 2; ++fd) {
    if (::fcntl(fd, F_GETFD) != -1 || errno != EBADF) continue;
    const int n = ::open("/dev/null", O_RDONLY);
    if (n >= 0 && n != fd) {
      ::dup2(n, fd);
      ::close(n);
    }
  }
}

// Standard output, written through a buffer that remembers why a write failed (probes/io/results_file.hpp).
probes::fd_writer* stdout_writer = nullptr;

// Returns why standard output lost what was written to it ("" when all of it arrived): a full disk,
// a closed stream, a pipe that failed.
std::string stdout_failure() {
  std::cout.flush();
  if (stdout_writer && stdout_writer->error()) return std::strerror(stdout_writer->error());
  return std::cout ? "" : std::strerror(EIO);
}

// Returns `status`, or the output failure when standard output lost what the command wrote (reported).
int checked_stdout(int status) {
  const std::string why = stdout_failure();
  if (why.empty()) return status;
  std::cerr << one_line("headroom: cannot write output: standard output: writing failed (" + why + ")")
            << "\n";
  return exit_output_failed;
}

// Holds what a command writes to stderr (warnings) until it ends: a command that fails prints its one
// error line alone, and one that ends passes its lines on, each sanitised and capped like an error line.
class held_stderr {
 public:
  held_stderr() : m_old(std::cerr.rdbuf(&m_held)) {}
  held_stderr(const held_stderr&) = delete;
  held_stderr& operator=(const held_stderr&) = delete;
  ~held_stderr() { release(true); }
  // Restores stderr; passes on what was held when `pass_on`, else drops it.
  void release(bool pass_on) {
    if (!m_old) return;
    std::cerr.rdbuf(m_old);
    m_old = nullptr;
    if (!pass_on) return;
    std::istringstream in(m_held.str());
    for (std::string line; std::getline(in, line);) std::cerr << one_line(line) << "\n";
  }

 private:
  std::stringbuf m_held;
  std::streambuf* m_old;
};

// Returns " (did you mean 'X'?)" for the first unknown word of a failed parse: an option of the innermost
// subcommand given (or of any subcommand when none was), or a subcommand; "" when nothing is close
// (planner/json_fields.hpp, closest_name: within a third of its length).
std::string did_you_mean(CLI::App& app, int argc, char** argv) {
  const CLI::App* at = &app;
  for (const CLI::App* sub = &app; sub;) {  // the innermost subcommand parsed
    at = sub;
    const auto parsed = sub->get_subcommands();
    sub = parsed.empty() ? nullptr : parsed.front();
  }
  std::vector<std::string> options, subcommands;
  options = option_names(*at);
  for (const CLI::App* sub : at->get_subcommands({}))
    if (!dynamic_cast<const CLI::Option_group*>(sub)) subcommands.push_back(sub->get_name());
  for (int i = 1; i < argc; ++i) {
    const std::string word = argv[i];
    if (word.rfind("--", 0) == 0) {
      if (const std::string best = meant_option(word, options); !best.empty())
        return " (did you mean '" + best + "'?)";
    } else if (!subcommands.empty() && word[0] != '-') {
      const std::string best = detail::closest_name(word, subcommands);
      if (!best.empty() && best != word) return " (did you mean '" + best + "'?)";
    }
  }
  return "";
}

// Returns "probe snapshot does not take: W1 W2 ..." for the words the innermost parsed subcommand left over, in the
// order given on the command line (CLI11's remaining() lists them reversed).
std::string extra_words(CLI::App& app, int argc, char** argv) {
  CLI::App* at = &app;
  std::string command;
  for (CLI::App* sub = &app; sub;) {
    at = sub;
    if (sub != &app) command += (command.empty() ? "" : " ") + sub->get_name();
    const auto parsed = sub->get_subcommands();
    sub = parsed.empty() ? nullptr : parsed.front();
  }
  auto left = at->remaining();
  if (left.empty()) left = app.remaining();
  // Each leftover word, matched to its first unused place in argv, in argv's order.
  std::vector<bool> used(static_cast<std::size_t>(argc), false);
  std::vector<std::pair<int, std::string>> placed;
  for (const auto& w : left)
    for (int i = 1; i < argc; ++i)
      if (!used[static_cast<std::size_t>(i)] && w == argv[i]) {
        used[static_cast<std::size_t>(i)] = true;
        placed.emplace_back(i, w);
        break;
      }
  std::sort(placed.begin(), placed.end());
  std::string words;
  for (const auto& [_, w] : placed) words += (words.empty() ? "" : " ") + w;
  return (command.empty() ? std::string("headroom") : command) + " does not take: " + words;
}

// Returns nlohmann's message without its "[json.exception.KIND.N] " tag: what a user can read.
std::string json_error_text(const nlohmann::json::exception& e) {
  return without_json_tag(e.what());
}

// Returns the one error line for the first empty argument ("headroom plan ''"), or nullopt: an empty word
// is no subcommand, option or value, and CLI11 would drop it silently, answering a command not typed.
std::optional<std::string> empty_argument(int argc, char** argv) {
  for (int i = 1; i < argc; ++i)
    if (argv[i][0] == '\0')
      return "headroom: bad input: argument " + std::to_string(i) + " is empty" +
             (i > 1 ? " (after '" + printable(argv[i - 1], 60) + "')" : std::string()) +
             ": remove it, or give the value it stands for (run with --help for usage)";
  return std::nullopt;
}

// The subcommands, as main() registered them.
struct commands {
  CLI::App *plan, *trace, *probe, *snapshot, *calibrate, *compare, *report, *validate, *presets, *recipes,
      *gpus, *context, *observe;
};

struct options {
  bool presets_json = false, recipes_json = false, gpus_json = false;
  plan_options plan;
  trace_options trace;
  probe_command_options probe;
  snapshot_options snapshot;
  calibrate_options cal;
  observe_options observe;
  compare_options compare;
  report_options report;
  validate_options validate;
};

commands add_commands(CLI::App& app, options& o) {
  commands c{};
  c.plan = add_plan_command(app, o.plan);
  c.trace = add_trace_command(app, o.trace);
  c.probe = add_probe_command(app, o.probe);
  c.snapshot = add_snapshot_command(app, o.snapshot);
  c.calibrate = add_calibrate_command(app, o.cal);
  c.observe = add_observe_command(app, o.observe);
  c.compare = add_compare_command(app, o.compare);
  c.report = add_report_command(app, o.report);
  c.validate = add_validate_command(app, o.validate);
  c.presets = app.add_subcommand("presets", "List the model presets: parameters, shape, sequence, kind, source");
  c.presets->add_flag("--json", o.presets_json, "Write them as JSON");
  c.recipes =
      app.add_subcommand("recipes", "List the precision recipes: bytes per parameter and what each shards");
  c.recipes->add_flag("--json", o.recipes_json, "Write them as JSON");
  c.gpus = app.add_subcommand("gpus", "List the GPU types --gpu-type takes: capacity, architecture, FP8, rate");
  c.gpus->add_flag("--json", o.gpus_json, "Write them as JSON");
  c.context = app.add_subcommand("context-probe", "Internal: measure the CUDA context (for probe overheads)");
  c.context->group("");  // not listed in --help
  return c;
}

// Runs the parsed subcommand; returns its exit status. Errors propagate as exceptions.
int dispatch(const commands& c, const options& o) {
  if (c.recipes->parsed()) {
    write_recipes(std::cout, o.recipes_json);
    return exit_fits;
  }
  if (c.gpus->parsed()) {
    write_gpus(std::cout, o.gpus_json);
    return exit_fits;
  }
  if (c.presets->parsed()) {
    write_presets(std::cout, o.presets_json);
    return exit_fits;
  }
  if (c.plan->parsed()) return run_plan(o.plan);
  if (c.validate->parsed()) return run_validate(o.validate);
  if (c.calibrate->parsed()) return run_calibrate(o.cal);
  if (c.observe->parsed()) return run_observe(o.observe);
  if (c.compare->parsed()) return run_compare(o.compare);
  if (c.report->parsed()) return run_report(o.report);
  if (c.snapshot->parsed()) return run_snapshot(o.snapshot);
  if (c.trace->parsed()) return run_trace(o.trace);
  if (c.probe->parsed()) return run_probe(o.probe);
  if (c.context->parsed()) {
    if (auto why = probes::cuda_unavailable_reason()) {
      std::cerr << "headroom: no CUDA device (" << *why << ")\n";
      return exit_no_device;
    }
    return run_context_probe();
  }
  return exit_internal;
}

// Runs the subcommand and turns what it throws into one line on stderr and an exit status; a command that
// ends without throwing has its standard output checked.
int run_command(const commands& c, const options& o) {
  held_stderr held;
  std::string line;
  int status = exit_internal;
  try {
    status = dispatch(c, o);
    held.release(true);
    return checked_stdout(status);
  } catch (const bad_input& e) {
    line = std::string("headroom: bad input: ") + e.what();
    status = exit_bad_input;
  } catch (const nlohmann::json::exception& e) {
    // A JSON value of the wrong type deep inside an input file: the input's problem. Readers name the file
    // and field themselves; this is the last net, and shows the library's text without its
    // "[json.exception.type_error.302]" tag.
    line = std::string("headroom: bad input: unreadable JSON value (") + json_error_text(e) + ")";
    status = exit_bad_input;
  } catch (const probes::output_error& e) {
    line = std::string("headroom: cannot write output: ") + e.what();
    status = exit_output_failed;
  } catch (const probes::device_error& e) {
    line = std::string("headroom: device error: ") + e.what();
    status = exit_device_failed;
  } catch (const std::bad_alloc&) {
    line = "headroom: out of host memory (the input asks for more than this machine has)";
    status = exit_bad_input;
  } catch (const std::exception& e) {
    line = std::string("headroom: internal error: ") + e.what();
    status = exit_internal;
  }
  held.release(false);
  std::cerr << one_line(line) << "\n";
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  keep_standard_descriptors();
  probes::fd_writer out(STDOUT_FILENO);
  stdout_writer = &out;
  // Restored (after a last flush) before `out` goes, so nothing writes through it at exit.
  struct restore {
    std::streambuf* old;
    ~restore() {
      std::cout.flush();
      std::cout.rdbuf(old);
      stdout_writer = nullptr;
    }
  } restore_stdout{std::cout.rdbuf(&out)};
  // A write past a file-size limit fails with EFBIG instead of killing the process, so the temporary file
  // is removed and the error reported.
  std::signal(SIGXFSZ, SIG_IGN);
  // A SIGTERM, SIGINT or SIGHUP while output files are written removes their temporaries, then kills the
  // process as it would have (probes/io/results_file.hpp).
  probes::remove_temporaries_on_signals();
  CLI::App app{"headroom: will one training step fit in each GPU's memory, and with how much headroom"};
  app.require_subcommand(1);
  app.set_version_flag("--version", records::tool_version() + " (" + records::git_revision() + ")");
  options o;
  const commands c = add_commands(app, o);
  for (int i = 0; i < argc; ++i) o.probe.command_line += (i ? " " : "") + std::string(argv[i]);
  o.snapshot.command_line = o.probe.snapshot.command_line = o.probe.command_line;
  // The flag forms of `probe` that its subcommands replaced: one line naming the new form.
  if (auto empty = empty_argument(argc, argv)) {
    std::cerr << one_line(*empty) << "\n";
    return exit_bad_input;
  }
  if (auto moved = moved_probe_form(argc, argv)) {
    std::cerr << one_line(*moved) << "\n";
    return exit_bad_input;
  }
  if (auto empty_item = empty_list_item(app, std::vector<std::string>(argv + 1, argv + argc))) {
    std::cerr << one_line("headroom: bad input: " + std::string(empty_item->what())) << "\n";
    return exit_bad_input;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return checked_stdout(app.exit(e));
  } catch (const CLI::CallForAllHelp& e) {
    return checked_stdout(app.exit(e));
  } catch (const CLI::Success& e) {
    return checked_stdout(app.exit(e));
  } catch (const CLI::ExtrasError&) {
    // CLI11 names the extra words last first ("x --preset"): named here in the order they were given.
    std::cerr << one_line("headroom: " + extra_words(app, argc, argv) + did_you_mean(app, argc, argv) +
                          " (run with --help for usage)")
              << "\n";
    return exit_bad_input;
  } catch (const CLI::ParseError& e) {
    std::cerr << one_line(std::string("headroom: ") + e.what() + did_you_mean(app, argc, argv) +
                          " (run with --help for usage)")
              << "\n";
    return exit_bad_input;
  }
  return run_command(c, o);
}
