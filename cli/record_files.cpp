// record_files.cpp: see record_files.hpp.
#include "record_files.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "calibrate/html_report.hpp"
#include "planner/errors.hpp"
#include "planner/format.hpp"
#include "planner/model_files.hpp"

namespace headroom::cli {

namespace fs = std::filesystem;

namespace {

// Returns the *.json files under the directory `dir`, sorted. A walk that cannot go on (an unreadable
// subdirectory, a symbolic link loop, an entry whose type cannot be read) is bad input naming the path: a
// record set read in part would answer a question not asked.
std::vector<std::string> records_under(const std::string& dir) {
  std::vector<std::string> found;
  std::error_code ec;
  fs::recursive_directory_iterator it(dir, fs::directory_options::none, ec);
  std::string at = dir;
  for (; !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    at = it->path().string();
    const bool json = it->path().extension() == ".json";
    std::error_code sec;
    const auto st = it->status(sec);
    // A dangling link that is not a record is no record; anything else unreadable stops the walk.
    if (sec && (json || sec != std::errc::no_such_file_or_directory))
      throw bad_input("records", in_quotes(at) + " cannot be read (" + sec.message() + ")");
    if (json && fs::is_regular_file(st)) found.push_back(at);
  }
  if (ec)
    throw bad_input("records",
                    "walking " + in_quotes(dir) + " failed at " + in_quotes(at) + " (" + ec.message() + ")");
  std::sort(found.begin(), found.end());
  return found;
}

}  // namespace

std::string in_quotes(const std::string& path) {
  std::string quoted(1, '\'');
  quoted += printable(path, 120);
  quoted += '\'';
  return quoted;
}

std::vector<std::string> record_files(const std::vector<std::string>& args) {
  std::vector<std::string> out;
  for (const auto& a : args) {
    std::error_code ec;
    const auto st = fs::status(a, ec);
    if (ec && st.type() == fs::file_type::not_found)
      throw bad_input("records", in_quotes(a) + ": no such file or directory");
    if (ec) throw bad_input("records", in_quotes(a) + " cannot be read (" + ec.message() + ")");
    if (fs::is_directory(st)) {
      const auto found = records_under(a);
      out.insert(out.end(), found.begin(), found.end());
    } else if (fs::is_regular_file(st)) {
      out.push_back(a);
    } else {
      throw bad_input("records", in_quotes(a) + " is not a record file or a directory of them");
    }
  }
  return out;
}

probes::measurement_record record_from(const nlohmann::json& j, const std::string& file) {
  try {
    return probes::measurement_from_json(j, file);
  } catch (const bad_input& e) {
    const std::string what = e.what();
    if (what.rfind(file, 0) == 0) throw;
    throw bad_input(file, what);  // "reserve: must not be negative" from the record's case
  } catch (const nlohmann::json::exception& e) {
    throw bad_input(file, "a value of the wrong type (" + printable(without_json_tag(e.what()), 120) + ")");
  }
}

std::vector<probes::measurement_record> read_records(const std::vector<std::string>& args) {
  std::vector<probes::measurement_record> out;
  const auto files = record_files(args);
  // Bounded cost: at most max_records records, each held as its typed fields and its timeline.
  if (files.size() > calibrate::max_records)
    throw bad_input("records", std::to_string(files.size()) + " records given; a command reads at most " +
                                   std::to_string(calibrate::max_records) + " (split the set)");
  for (const auto& f : files) out.push_back(record_from(read_json_file(f), f));
  return out;
}

std::vector<std::string> problem_input_files(const plan_options& o) {
  // --recipe and --megatron-args may name a built-in or a string rather than a file: output_set::input
  // passes over what is not there.
  std::vector<std::string> files;
  for (const std::string* f : {&o.model_file, &o.hf_config, &o.recipe, &o.megatron_args, &o.deepspeed_config,
                               &o.torchtitan_config, &o.calibration})
    if (!f->empty()) files.push_back(*f);
  return files;
}

void add_problem_inputs(probes::output_set& outs, const plan_options& o) {
  for (const auto& f : problem_input_files(o)) outs.input(f);
}

std::string shown(const std::string& s) {
  return s.empty() ? "-" : printable(s);
}

std::string gib_text(double b) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f GiB", b / (1024.0 * 1024 * 1024));
  return buf;
}

}  // namespace headroom::cli
