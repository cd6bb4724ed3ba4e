// printable_target.cpp: the printable fuzz target. The first two bytes give the length limit n (0 to 400),
// the rest is the string. Invariants of headroom::printable(s, n) (planner/format.hpp): no byte below 0x20
// and no DEL; well-formed UTF-8 with no C1 control, bidirectional embedding, override, isolate or mark, and
// no line or paragraph separator; at most max(n, 5) characters; the string itself when it was already safe and
// short enough, else its whole printable form or that form's start and end around "..."; and applying it
// again changes nothing.
#include <algorithm>
#include <cstddef>
#include <string>
#include <string_view>

#include "fuzz_internal.hpp"
#include "planner/format.hpp"

namespace headroom::fuzz {
namespace {

// Returns the number of code points in `s` when it is well-formed UTF-8 holding none of the code points a
// terminal misreads (C0 and C1 controls, DEL, bidirectional controls and marks, U+2028 / U+2029); else npos.
std::size_t safe_length(const std::string& s) {
  std::size_t count = 0;
  for (std::size_t i = 0; i < s.size(); ++count) {
    const auto c = static_cast<unsigned char>(s[i]);
    std::size_t n = c < 0x80                 ? 1
                    : c >= 0xc2 && c <= 0xdf ? 2
                    : c >= 0xe0 && c <= 0xef ? 3
                    : c >= 0xf0 && c <= 0xf4 ? 4
                                             : 0;
    if (n == 0 || i + n > s.size()) return std::string::npos;
    char32_t cp = n == 1 ? c : c & (0x7f >> n);
    for (std::size_t k = 1; k < n; ++k) {
      const auto b = static_cast<unsigned char>(s[i + k]);
      if ((b & 0xc0) != 0x80) return std::string::npos;
      cp = (cp << 6) | (b & 0x3f);
    }
    const char32_t least[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < least[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return std::string::npos;
    if (cp < 0x20 || (cp >= 0x7f && cp <= 0x9f) || (cp >= 0x202a && cp <= 0x202e) ||
        (cp >= 0x2066 && cp <= 0x2069) || cp == 0x200e || cp == 0x200f || cp == 0x2028 || cp == 0x2029)
      return std::string::npos;
    i += n;
  }
  return count;
}

// Returns whether `out` is `full` whole, or a start of `full`, "...", and an end of `full`.
bool cut_of(const std::string& out, const std::string& full) {
  if (out == full) return true;
  for (auto at = out.find("..."); at != std::string::npos; at = out.find("...", at + 1)) {
    const std::string_view head(out.data(), at), tail(out.data() + at + 3, out.size() - at - 3);
    if (head.size() + tail.size() < full.size() && full.starts_with(head) && full.ends_with(tail))
      return true;
  }
  return false;
}

}  // namespace

void fuzz_printable(std::string_view bytes) {
  byte_reader in(bytes);
  const std::size_t hi = in.next(), lo = in.next();
  const std::size_t n = (hi << 8 | lo) % 401;
  const std::string s(in.rest());
  const std::string out = printable(s, n);
  const std::size_t chars = safe_length(out);
  require(chars != std::string::npos);
  require(chars <= std::max<std::size_t>(n, 5));
  // A string already safe and short enough is printed as it is.
  if (const std::size_t len = safe_length(s); len != std::string::npos && len <= std::max<std::size_t>(n, 5))
    require(out == s);
  // Escaping alone, with no limit, is safe too; the limited form is it or its start and end.
  const std::string full = printable(s, std::string::npos);
  require(safe_length(full) != std::string::npos);
  require(cut_of(out, full));
  require(printable(out, n) == out);
}

}  // namespace headroom::fuzz
