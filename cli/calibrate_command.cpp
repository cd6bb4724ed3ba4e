// calibrate_command.cpp: `headroom calibrate` (see calibrate_command.hpp). Parsing and printing only: the fit
// lives in calibrate/calibration.cpp.
#include "calibrate_command.hpp"

#include <cmath>
#include <cstdio>
#include <iostream>
#include <sstream>

#include "calibrate/calibration.hpp"
#include "exit_codes.hpp"
#include "one_line.hpp"
#include "planner/errors.hpp"
#include "planner/format.hpp"
#include "probes/io/results_file.hpp"
#include "record_files.hpp"

namespace headroom::cli {

CLI::App* add_calibrate_command(CLI::App& app, calibrate_options& o) {
  auto* c = app.add_subcommand(
      "calibrate", "Fit the reserve's terms from measurement records (probes, snapshots, observations)");
  c->add_option("records", o.records, "Record files or directories of them")->required();
  c->add_option("-o,--out", o.out, "Write the calibration (headroom.calibration/1.x) to FILE")->required();
  c->add_flag("--force", o.force, "Replace the output file if it exists");
  return c;
}

namespace {

// The ranges and lists a calibration was fitted on (calibration_domain), one line each.
std::string domain_summary(const calibrate::calibration_domain& d) {
  auto list = [](const std::vector<std::string>& v) {
    std::string out;
    for (const auto& x : v) out += (out.empty() ? "" : ", ") + printable(x, 60);
    return out.empty() ? std::string("(not stated)") : out;
  };
  auto range = [](const calibrate::value_range& r, double scale, const char* unit) {
    if (r.empty) return std::string("(no record with a case)");
    return eng(r.lo / scale) + " to " + eng(r.hi / scale) + unit;
  };
  std::ostringstream s;
  s << "fitted on (the calibration's domain; plans beyond it are warned):\n"
    << "  GPUs " << list(d.gpus) << "; drivers " << list(d.drivers) << "; allocators " << list(d.allocators)
    << "; recipes " << list(d.recipes) << "\n"
    << "  model sizes " << range(d.parameters, 1, " parameters") << "; tokens per micro-batch "
    << range(d.tokens, 1, "") << "; predicted step peaks " << range(d.predicted_peak, gib, " GiB")
    << "\n  records:";
  for (const auto& [k, n] : d.kinds) s << " " << n << " " << printable(k, 60) << ";";
  s << "\n";
  return s.str();
}

// The calibration's summary: what it holds for, every term, the residual of every record. Every string
// from the records is sanitised.
std::string calibration_summary(const calibrate::calibration& c, std::size_t records,
                                const std::string& out) {
  std::ostringstream s;
  s << "headroom calibrate: " << records << " records -> "
    << (out == "-" ? "standard output" : printable(out)) << "\n";
  s << "holds for: GPU " << (c.gpu.empty() ? "(not stated: no CUDA record)" : printable(c.gpu)) << ", driver "
    << shown(c.driver) << ", CUDA " << shown(c.cuda_runtime) << ", NCCL " << shown(c.nccl) << ", allocator "
    << shown(c.allocator) << "\n\n";
  const char* units[] = {"bytes", "bytes per churning byte", "bytes per token"};
  for (int t = 0; t < calibrate::term_count; ++t) {
    char line[200];
    if (t == 0)  // bytes: read in GiB, as every other figure headroom prints
      std::snprintf(line, sizeof line, "  %-14s %12.3f GiB +- %-8.3f GiB", calibrate::term_name(t),
                    c.terms[t].value / (1024.0 * 1024 * 1024), c.terms[t].stderr_ / (1024.0 * 1024 * 1024));
    else
      std::snprintf(line, sizeof line, "  %-14s %16.6g +- %-12.3g %s", calibrate::term_name(t),
                    c.terms[t].value, c.terms[t].stderr_, units[t]);
    s << line << "  (" << printable(c.terms[t].why, 400) << ")\n";
  }
  {
    char line[200];
    std::snprintf(line, sizeof line, "  %-14s %16.6g +- %-12.3g %s", "activations", c.activation.value,
                  c.activation.stderr_, "bytes per ledger activation byte (factor - 1)");
    s << line << "  (" << printable(c.activation.why, 400) << ")\n";
  }
  s << "  margin         " << gib_text(c.margin) << "  (" << printable(c.margin_rule) << ")\n";
  if (calibrate::fixed_is_prior(c))
    s << "  no record held the CUDA context: the fixed term is the documented prior, not measured\n";
  s << "\n" << domain_summary(c.domain) << "\n";
  s << "residuals (reserve needed - predicted):\n";
  for (const auto& r : c.records) {
    char pct[32];
    std::snprintf(pct, sizeof pct, "%+.1f%%", r.y != 0 ? 100.0 * r.residual / std::fabs(r.y) : 0.0);
    s << "  " << printable(r.origin) << " [" << printable(r.kind) << " "
      << printable(r.figure.empty() ? r.backend : r.figure) << (r.measured ? "" : ", emulated")
      << "]: needed " << gib_text(r.y) << ", predicted " << gib_text(r.predicted) << ", residual "
      << gib_text(r.residual) << " (" << pct << ")\n";
  }
  s << "worst: " << printable(c.worst_origin) << " (" << gib_text(c.worst_residual) << ")\n";
  // The verdict: a weak fit is written (the records stay inspectable) but plan does not use it.
  if (const auto weak = calibrate::weakness(c); !weak.empty())
    s << "verdict: too weak to use: " << printable(weak, 400)
      << "; plan --calibration keeps the default reserve with it (and --strict-calibration refuses it): add "
         "records at other sizes\n";
  else
    s << "verdict: usable: no term that carries " << static_cast<int>(100 * calibrate::weak_term_share)
      << "% of a record's reserve has a standard error above " << static_cast<int>(100 * calibrate::weak_term_stderr) << "% of its value, no record is missed by more than "
      << static_cast<int>(100 * calibrate::weak_residual_share) << "% of the reserve it needed\n";
  return s.str();
}

}  // namespace

int run_calibrate(const calibrate_options& o) {
  probes::output_set outs(o.force, &std::cout);
  for (const auto& f : record_files(o.records)) outs.input(f);
  outs.expect(o.out);
  const auto records = read_records(o.records);
  if (records.empty()) throw bad_input("calibrate", "no record files found");
  const calibrate::calibration c = calibrate::fit(records);
  for (int t = 0; t < calibrate::term_count; ++t)  // a term kept at its prior: said where it cannot be missed
    if (c.terms[t].pinned)
      std::cerr << one_line("headroom: warning: calibrate: " + std::string(calibrate::term_name(t)) + " " +
                            c.terms[t].why)
                << "\n";
  outs.add(o.out, calibrate::to_json(c).dump(2) + "\n");
  outs.commit();
  // With "-" the calibration alone is standard output: the summary goes to stderr.
  (outs.to_stdout() ? std::cerr : std::cout) << calibration_summary(c, records.size(), o.out);
  return exit_fits;
}

}  // namespace headroom::cli
