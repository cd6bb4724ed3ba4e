// record_files.hpp: reading record sets named on the command line (files, or directories searched for
// *.json), shared by `calibrate`, `compare`, `report` and `observe`; and the GiB figure they print.
#pragma once

#include <string>
#include <vector>

#include "probes/records/measurement_record.hpp"

namespace headroom::cli {

// Returns `path` quoted and sanitised for a message.
std::string in_quotes(const std::string& path);

// Returns the record files named: files as given, directories searched for *.json (sorted). A name that
// is neither a regular file nor a directory is bad input.
std::vector<std::string> record_files(const std::vector<std::string>& args);

// Reads every record: a file that is not a measurement record is bad input (one line, nothing else
// printed), for every command that reads record sets alike. At most calibrate::max_records.
std::vector<probes::measurement_record> read_records(const std::vector<std::string>& args);

// Returns `s` sanitised for a summary, "-" when empty.
std::string shown(const std::string& s);

// Returns bytes `b` as "1.234 GiB".
std::string gib_text(double b);

}  // namespace headroom::cli
