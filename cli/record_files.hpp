// record_files.hpp: reading record sets named on the command line (files, or directories searched for
// *.json), shared by `calibrate`, `compare`, `report` and `observe`; and the GiB figure they print.
#pragma once

#include <string>
#include <vector>

#include "plan_command.hpp"
#include "probes/io/results_file.hpp"
#include "probes/records/measurement_record.hpp"

namespace headroom::cli {

// Returns `path` quoted and sanitised for a message.
std::string in_quotes(const std::string& path);

// Returns the record files named: files as given, directories searched for *.json (sorted). A name that
// is neither a regular file nor a directory is bad input.
std::vector<std::string> record_files(const std::vector<std::string>& args);

// Returns the measurement record in `j`, read from the file `file` (probes/records/measurement_record.hpp),
// with every refusal naming the file: a value of the wrong type deep in it (nlohmann's text without its
// "[json.exception...]" tag), or a field of its case refused by a reader that names only the field.
probes::measurement_record record_from(const nlohmann::json& j, const std::string& file);

// Reads every record: a file that is not a measurement record is bad input (one line, nothing else
// printed), for every command that reads record sets alike. At most calibrate::max_records.
std::vector<probes::measurement_record> read_records(const std::vector<std::string>& args);

// Returns the paths the problem options may read as files (--model, --hf-config, --recipe, --megatron-args,
// --deepspeed-config, --torchtitan-config, --calibration; the ones given). The one list of them.
std::vector<std::string> problem_input_files(const plan_options& o);
// Names as inputs of `outs` every file the problem options read (problem_input_files), so that no output of
// the command overwrites one.
void add_problem_inputs(probes::output_set& outs, const plan_options& o);

// Returns `s` sanitised for a summary, "-" when empty.
std::string shown(const std::string& s);

// Returns bytes `b` as "1.234 GiB".
std::string gib_text(double b);

}  // namespace headroom::cli
