// probe_modes.cpp: `probe max-fit AXIS` (the largest value that fits on the device, beside the planner's)
// and `probe overheads` (the fixed costs of a GPU stack), with `context-probe`, the child process that
// measures the CUDA context under the other module-loading mode (see probe_command.hpp). Parsing and
// printing only: the searches and the overhead arithmetic live in probes/cases/.
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <sstream>

#include "exit_codes.hpp"
#include "record_files.hpp"
#include "planner/errors.hpp"
#include "planner/format.hpp"
#include "planner/problem_json.hpp"
#include "planner/units.hpp"
#include "probe_command.hpp"
#include "probe_target.hpp"
#include "probes/cases/gpu_backend.hpp"
#include "probes/cases/max_fit.hpp"
#include "probes/cases/measurement.hpp"
#include "probes/io/results_file.hpp"
#include "tables.hpp"
#include "probes/records/envelope.hpp"

namespace headroom::cli {

using namespace headroom::probes;

namespace {

// The GEMM of the overhead probe: the model's QKV projection for one micro-batch on one tp rank.
overhead_shapes shapes_of(const problem& p, const layout& l, double bucket_mb) {
  const auto& m = p.model;
  overhead_shapes s;
  s.m = p.training.seq * p.training.micro_batch;
  s.k = m.hidden;
  s.n = (m.heads + 2 * m.kv_heads) * m.head_dim / l.tp;
  s.bucket_bytes = static_cast<std::int64_t>(std::llround(bucket_mb * static_cast<double>(mib))) / 2 * 2;
  s.gemm_origin = "QKV projection of " + m.name + ": seq " + std::to_string(p.training.seq) +
                  " x micro-batch " + std::to_string(p.training.micro_batch) + ", hidden " +
                  std::to_string(m.hidden) + ", tp " + std::to_string(l.tp);
  const std::int64_t operands = 2 * (s.m * s.k + s.k * s.n + s.m * s.n);
  if (s.m > (1 << 30) || s.n > (1 << 30) || s.k > (1 << 30) || operands > 64 * gib)
    throw bad_input("overheads", "the model's GEMM (" + std::to_string(s.m) + " x " + std::to_string(s.n) +
                                     " x " + std::to_string(s.k) + ") is too large to run as a probe");
  return s;
}

// Runs `headroom context-probe` with CUDA_MODULE_LOADING=`mode` and returns 0 with its standard output in
// `text`, or the errno of a failed start (-1 for a pipe that could not be made), or -2 for a child that failed.
int run_context_child(const std::string& mode, std::string& text, int& status) {
  int fds[2];
  if (pipe(fds) != 0) return -1;
  std::vector<std::string> env_text;
  for (char** e = environ; *e; ++e)
    if (std::strncmp(*e, "CUDA_MODULE_LOADING=", 20) != 0) env_text.emplace_back(*e);
  env_text.push_back("CUDA_MODULE_LOADING=" + mode);
  std::vector<char*> envp;
  for (auto& e : env_text) envp.push_back(e.data());
  envp.push_back(nullptr);
  char self[] = "/proc/self/exe", sub[] = "context-probe";
  char* argv[] = {self, sub, nullptr};
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&fa, fds[0]);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, self, &fa, nullptr, argv, envp.data());
  posix_spawn_file_actions_destroy(&fa);
  close(fds[1]);
  char buf[4096];
  for (ssize_t n; rc == 0 && (n = read(fds[0], buf, sizeof buf)) > 0;)
    text.append(buf, static_cast<std::size_t>(n));
  close(fds[0]);
  if (rc != 0) return rc;
  waitpid(pid, &status, 0);
  return !WIFEXITED(status) || WEXITSTATUS(status) != 0 ? -2 : 0;
}

// Returns the CUDA context measured by `headroom context-probe` in a child process under
// CUDA_MODULE_LOADING=`mode` (a process has one context, made once: the other mode needs another process),
// or a layer that says why it could not be measured.
overhead_layer context_in_child(const std::string& mode) {
  const overhead_layer failed{"CUDA context", std::nullopt, 0, true, ""};
  auto fail = [&](const std::string& why) {
    overhead_layer l = failed;
    l.note = "not measured: " + why;
    return l;
  };
  std::string text;
  int status = 0;
  const int rc = run_context_child(mode, text, status);
  if (rc == -1) return fail("pipe failed");
  if (rc == -2) return fail("the child process failed (status " + std::to_string(status) + ")");
  if (rc != 0) return fail(std::string("cannot start a child: ") + std::strerror(rc));
  try {
    const auto j = nlohmann::json::parse(text);
    overhead_layer l = failed;
    if (!j.at("bytes").is_null()) l.bytes = j.at("bytes").get<std::int64_t>();
    l.used_after = j.at("used_after").get<std::int64_t>();
    l.note = j.at("note").get<std::string>() + ", in a child process";
    return l;
  } catch (const nlohmann::json::exception&) {
    return fail("the child's answer was not the expected JSON");
  }
}

std::string overheads_text(const overheads& r, const environment& env, const problem& p,
                           const std::string& json_out) {
  std::ostringstream out;
  out << "headroom probe overheads: " << env.gpu->gpu << ", driver " << env.gpu->driver << ", CUDA runtime "
      << env.gpu->cuda_runtime << ", NCCL " << env.gpu->nccl.value_or("not loaded") << "\n";
  out << "measured: layered deltas of device-used memory (NVML before the context, cudaMemGetInfo after)\n\n";
  char buf[200];
  std::snprintf(buf, sizeof buf, "  %-24s %12s %14s\n", "layer", "MiB", "device used");
  out << buf;
  for (const auto& x : r.layers) {
    std::snprintf(buf, sizeof buf, "  %-24s %12s %14s   ", x.name.c_str(),
                  x.bytes ? mib_str(*x.bytes).c_str() : "-", (gib_str(x.used_after, 2) + " GiB").c_str());
    out << buf << x.note << "\n";
  }
  if (r.context_other_mode)
    out << "\nCUDA context with CUDA_MODULE_LOADING=" << r.other_module_loading << ": "
        << (r.context_other_mode->bytes ? mib_str(*r.context_other_mode->bytes) + " MiB" : std::string("-"))
        << " (" << r.context_other_mode->note << ")\n";
  out << "\nfixed overhead (context + cuBLAS + NCCL, measured layers): " << mib_str(r.fixed_bytes())
      << " MiB of the planner's " << gib_str(p.device.reserve.fixed, 1) << " GiB reserve\n";
  if (!json_out.empty()) out << "overheads record written to " << json_out << "\n";
  return out.str();
}

void write_search(std::ostream& out, const char* what, const fit_search& s, const char* note) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "  %-28s %10s   ", what,
                s.largest ? (std::to_string(*s.largest) + (s.reached_limit ? "+" : "")).c_str() : "none");
  out << buf << note << " (" << s.trials.size() << " trials)\n";
}

nlohmann::json search_json(const fit_search& s) {
  nlohmann::json trials = nlohmann::json::array();
  for (const auto& t : s.trials)
    trials.push_back({{"value", t.value}, {"fits", t.fits}, {"detail", t.detail}});
  return {{"largest", s.largest ? nlohmann::json(*s.largest) : nlohmann::json(nullptr)},
          {"reached_limit", s.reached_limit},
          {"trials", trials}};
}

// The record of `probe max-fit` (records::kind::max_fit).
nlohmann::json max_fit_json(const max_fit_result& r, fit_axis axis, const environment& env,
                            const nlohmann::json& inputs, probe_target& target) {
  nlohmann::json j = records::envelope(records::kind::max_fit);
  j["environment"] = environment_json(env);
  j["inputs"] = inputs;
  j["backend"] = target.backend();
  j["measured"] = target.gpu != nullptr;
  j["device"] = target.dev().describe();
  j["allocator"] = r.allocator;
  j["axis"] = to_string(axis);
  j["step"] = r.step;
  j["limit"] = r.limit;
  j["current"] = r.current;
  j["replayed"] = search_json(r.replayed);
  j["predicted_verdict"] = search_json(r.predicted_verdict);
  j["predicted_step_peak"] = search_json(r.predicted_peak);
  return j;
}

std::string max_fit_text(const max_fit_result& r, fit_axis axis, const problem& p, const layout& l,
                         probe_target& target, const std::string& json_out) {
  const bool gpu = target.gpu != nullptr;
  std::ostringstream out;
  out << "headroom probe max-fit " << to_string(axis) << ": " << printable(p.model.name) << ", " << zero_name(l)
      << ", recompute " << to_string(l.recompute) << ", " << axes_string(l) << "\n";
  out << "backend " << target.dev().describe()
      << (r.allocator.empty() ? std::string() : "; allocator " + r.allocator) << "\n";
  out << "largest " << to_string(axis) << " that fits in " << gib_str(p.device.capacity, 1)
      << " GiB (multiples of " << r.step << ", searched up to " << r.limit << "; now " << r.current << "):\n";
  write_search(out, gpu ? "replayed on the GPU" : "replayed on the sim device", r.replayed,
               gpu ? "measured: every trial a full replay with fill and verify"
                   : "emulated: allocator rules over the simulated device");
  write_search(out, "planner, step peak", r.predicted_peak, "predicted: step peak <= capacity, no reserve");
  write_search(out, "planner, verdict", r.predicted_verdict,
               "predicted: the verdict, reference total and step peak + overheads <= capacity");
  out << "trials on the device:\n";
  for (const auto& t : r.replayed.trials)
    out << "  " << to_string(axis) << " " << t.value << ": " << (t.fits ? "fits, " : "does not fit, ")
        << t.detail << "\n";
  if (!json_out.empty()) out << "max-fit record written to " << json_out << "\n";
  return out.str();
}

}  // namespace

int run_context_probe() {
  const overhead_layer l = probe_context_only();
  nlohmann::json j = {{"bytes", l.bytes ? nlohmann::json(*l.bytes) : nlohmann::json(nullptr)},
                      {"used_after", l.used_after},
                      {"note", l.note}};
  std::cout << j.dump() << "\n";
  return exit_fits;
}

int run_probe_overheads(const probe_overheads_options& o) {
  if (auto refused = refused_under_launcher("overheads")) return *refused;
  output_set outs(o.force, &std::cout);
  add_problem_inputs(outs, o.problem);
  outs.expect(o.json_out);  // refused before any work
  const problem p = problem_from(o.problem);
  check_bucket_mb(o.bucket_mb);
  const layout l = layout_from(o.problem);
  validate(p, l);
  const overhead_shapes shapes = shapes_of(p, l, o.bucket_mb);
  if (auto why = cuda_unavailable_reason()) {
    std::cerr << "headroom: no CUDA device (" << *why << ")\n";
    return exit_no_device;
  }
  overheads r = probe_overheads(shapes);
  r.other_module_loading = r.module_loading == "EAGER" ? "LAZY" : "EAGER";
  r.context_other_mode = context_in_child(r.other_module_loading);
  environment env{o.command_line, read_gpu_environment()};
  if (!o.json_out.empty()) {
    nlohmann::json inputs = problem_to_json(p);
    inputs["tool"] = "headroom";
    inputs["predicted"] = true;
    inputs["layout"] = axes_string(l);
    write_new_file(o.json_out, overheads_to_json(r, inputs, env).dump(2) + "\n", o.force, &std::cout);
    if (o.json_out == "-") return exit_fits;
  }
  std::cout << overheads_text(r, env, p, o.json_out);
  return exit_fits;
}

int run_probe_max_fit(const probe_max_fit_options& o) {
  if (auto refused = refused_under_launcher("max-fit")) return *refused;
  output_set outs(o.force, &std::cout);
  add_problem_inputs(outs, o.problem);
  outs.expect(o.json_out);  // refused before any work
  problem p = problem_from(o.problem);
  const caching_options copt = check_options(o);
  const layout l = layout_from(o.problem);
  validate(p, l);
  const fit_axis axis = fit_axis_from(o.axis);
  auto target = open_target(o, copt, p);
  if (!target) return exit_no_device;
  max_fit_options mo;
  mo.axis = axis;
  mo.limit = o.limit.value_or(0);
  mo.stage = o.stage;
  mo.make_allocator = target->make_allocator;
  mo.make_checker = target->make_checker;
  mo.cleanup_slack = target->gpu ? target->gpu->cleanup_slack() : 0;
  const max_fit_result r = max_fit(p, l, target->dev(), mo);
  const environment env = environment_of(o, &*target);
  const int status = r.replayed.largest ? exit_fits : exit_does_not_fit;
  if (!o.json_out.empty()) {
    const nlohmann::json j = max_fit_json(r, axis, env, case_inputs(p, l, ""), *target);
    write_new_file(o.json_out, j.dump(2) + "\n", o.force, &std::cout);
    if (o.json_out == "-") return status;
  }
  std::cout << max_fit_text(r, axis, p, l, *target, o.json_out);
  return status;
}

}  // namespace headroom::cli
