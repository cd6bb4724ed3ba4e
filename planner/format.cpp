// format.cpp: number formatting for the CLI and --explain, and the sanitiser every printer uses for strings
// from files (see format.hpp).
#include "format.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <utility>
#include <vector>

#include "units.hpp"

namespace headroom {

std::string bytes_str(double bytes) {
  static constexpr const char* units[] = {"KiB", "MiB", "GiB", "TiB"};
  if (!(std::fabs(bytes) >= 1024)) return fixed(bytes, 0) + " B";
  double v = bytes / 1024;
  std::size_t u = 0;
  while (std::fabs(v) >= 1024 && u + 1 < std::size(units)) v /= 1024, ++u;
  return fixed(v, 2) + " " + units[u];
}

std::string fixed(double x, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, x);
  std::string s = buf;
  if (s == "-0.0" || s == "-0" || s == "-0.00" || s == "-0.000") s = s.substr(1);
  return s;
}

std::string fixed_width(double x, int width, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%*.*f", width, decimals, x);
  return buf;
}

std::string gib_str(std::int64_t bytes, int decimals) {
  return fixed(to_gib(bytes), decimals);
}

std::string mib_str(std::int64_t bytes, int decimals) {
  return fixed(to_mib(bytes), decimals);
}

std::string gib_cell(std::int64_t bytes, int width, int decimals) {
  return fixed_width(to_gib(bytes), width, decimals);
}

std::string trim(double x, int decimals) {
  std::string s = fixed(x, decimals);
  if (s.find('.') != std::string::npos) {
    while (s.back() == '0') s.pop_back();
    if (s.back() == '.') s.pop_back();
  }
  return s;
}

std::string eng(double x) {
  if (x == 0 || !std::isfinite(x)) return trim(x, 3);
  const double ax = std::fabs(x);
  if (ax < 1e4) return trim(x, 3);
  int e = static_cast<int>(std::floor(std::log10(ax)));
  e -= e % 3;
  double m = x / std::pow(10.0, e);
  std::string ms = trim(m, std::max(0, 3 - static_cast<int>(std::floor(std::log10(std::fabs(m))))));
  return ms + "e" + std::to_string(e);
}

namespace {

// Returns the length of the UTF-8 sequence starting at s[i] and its code point, or 0 when the bytes there
// are not well-formed UTF-8 (overlong forms, surrogates and values past U+10FFFF included).
std::size_t utf8_at(const std::string& s, std::size_t i, char32_t& cp) {
  const auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[i + k]); };
  const unsigned char c = b(0);
  std::size_t n = 0;
  if (c >= 0xc2 && c <= 0xdf) {
    n = 2;
    cp = c & 0x1f;
  } else if (c >= 0xe0 && c <= 0xef) {
    n = 3;
    cp = c & 0x0f;
  } else if (c >= 0xf0 && c <= 0xf4) {
    n = 4;
    cp = c & 0x07;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  for (std::size_t k = 1; k < n; ++k) {
    if ((b(k) & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (b(k) & 0x3f);
  }
  const char32_t least[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < least[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  return n;
}

// Returns the escape a terminal cannot misread for one control character or code point.
std::string escaped(char32_t cp, bool byte) {
  char buf[16];
  switch (cp) {
    case '\n':
      return "\\n";
    case '\r':
      return "\\r";
    case '\t':
      return "\\t";
    default:
      break;
  }
  if (byte)
    std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned>(cp));
  else
    std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(cp));
  return buf;
}

// True for the code points that move the cursor or reorder text: C1 controls, bidirectional embeddings,
// overrides, isolates and the left-to-right / right-to-left marks, the line and paragraph separators.
bool unsafe_code_point(char32_t cp) {
  return (cp >= 0x80 && cp <= 0x9f) || (cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069) ||
         cp == 0x2028 || cp == 0x2029 || cp == 0x200e || cp == 0x200f;
}

}  // namespace

std::string without_json_tag(const std::string& what) {
  std::string m = what;
  if (m.rfind("[json.exception.", 0) == 0)
    if (const auto end = m.find("] "); end != std::string::npos) m.erase(0, end + 2);
  return m;
}

std::string printable(const std::string& s, std::size_t max_len) {
  // Each unit is what one character of `s` prints as (with its width in columns), so a cut never splits a
  // character or an escape.
  std::vector<std::pair<std::string, std::size_t>> units;
  std::size_t total = 0;
  for (std::size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    char32_t cp = 0;
    const std::size_t n = c < 0x80 ? 1 : utf8_at(s, i, cp);
    std::string u;
    if (c < 0x20 || c == 0x7f || n == 0)
      u = escaped(c, true);
    else if (n > 1 && unsafe_code_point(cp))
      u = escaped(cp, false);
    else
      u = s.substr(i, n);
    i += n == 0 ? 1 : n;
    const std::size_t width = n > 1 && u.size() == n ? 1 : u.size();
    total += width;
    units.emplace_back(std::move(u), width);
  }
  std::string out;
  max_len = std::max<std::size_t>(max_len, 5);
  if (total <= max_len) {
    for (const auto& u : units) out += u.first;
    return out;
  }
  // Cut the middle: the head and the tail share what is left after "...".
  const std::size_t keep = max_len - 3, head = (keep + 1) / 2, tail = keep - head;
  std::size_t first = 0, w = 0;
  while (first < units.size() && w + units[first].second <= head) w += units[first++].second;
  std::size_t last = units.size();
  w = 0;
  while (last > first && w + units[last - 1].second <= tail) w += units[--last].second;
  for (std::size_t k = 0; k < first; ++k) out += units[k].first;
  out += "...";
  for (std::size_t k = last; k < units.size(); ++k) out += units[k].first;
  return out;
}

}  // namespace headroom
