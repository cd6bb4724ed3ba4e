// format.hpp: how numbers are written for people: GiB with a fixed number of decimals, and counts in the
// reference case's engineering notation (175e9, 2.869e9). Bytes stay integers until this point.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace headroom {

// Returns bytes / 2^30 with `decimals` decimals, e.g. gib_str(2.8e12) == "2607.7".
std::string gib_str(std::int64_t bytes, int decimals = 1);
// Returns bytes / 2^20 with `decimals` decimals, e.g. mib_str(1056 << 20, 0) == "1056".
std::string mib_str(std::int64_t bytes, int decimals = 1);
// Returns a byte count in the largest binary unit that leaves at least 1 of it, with two decimals (whole
// bytes under 1 KiB): "512 B", "1.10 MiB", "3.25 GiB". For rates such as bytes per token.
std::string bytes_str(double bytes);
// Returns x with `decimals` decimals ("-0.0" is written "0.0").
std::string fixed(double x, int decimals);
// Returns x as printf's "%W.Df" writes it: right-aligned in `width` characters (at least), `decimals`
// decimals, the sign of a negative figure that rounds to zero kept ("-0.0"). For table columns.
std::string fixed_width(double x, int width, int decimals);
// Returns bytes / 2^30 as a table cell: fixed_width(GiB, width, decimals), e.g. gib_cell(2.8e12, 8)
// == "  2607.7".
std::string gib_cell(std::int64_t bytes, int width, int decimals = 1);
// Returns x in engineering notation with up to 4 significant digits: 175e9, 2.869e9, 350e9, 80.
std::string eng(double x);
// Returns x without trailing zeros after at most `decimals` decimals: 34, 2.5, 10.333.
std::string trim(double x, int decimals = 3);

// The longest a string from a file or an argument may be when printed on its own (a name, a path, a note).
inline constexpr std::size_t printable_max = 200;
// Returns `s` safe to print to a terminal as part of one line: control characters (NUL, newline, ESC, DEL,
// the C1 controls) and bidirectional overrides and marks are written as escapes ("\n", "\x1b", "\u202e"), bytes that
// are not UTF-8 as "\xHH", and a string longer than `max_len` characters is cut in the middle ("...") so
// that its start and its end (a file name's extension, an error's cause) both stay. Every string read from
// a file or a command line goes through this before any printer writes it; JSON outputs need not (JSON
// escapes on its own). Applying it twice changes nothing more.
std::string printable(const std::string& s, std::size_t max_len = printable_max);

// Returns an exception's message without nlohmann::json's "[json.exception.KIND.N] " tag (what a user can
// read of "a value of the wrong type"); other messages unchanged. The one place the tag is removed.
std::string without_json_tag(const std::string& what);

}  // namespace headroom
