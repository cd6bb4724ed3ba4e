// shell_expand.cpp: the word expansion of shell_expand.hpp, following the bash manual's "Shell Expansion"
// order for the forms launch scripts use (parameter and arithmetic expansion, then word splitting of what
// was unquoted). Only integers in arithmetic; unset names there leave the result unresolved instead of 0.
#include "planner/imports/shell_expand.hpp"

#include <cctype>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <optional>

#include "planner/errors.hpp"
#include "planner/format.hpp"

namespace headroom::detail {

namespace {
constexpr int max_depth = 32;
const std::string script = "launch script";

bool blank(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}
bool name_start(char c) {
  return std::isalpha(static_cast<unsigned char>(c)) || c == '_';
}
bool name_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
}

// Integer arithmetic of $(( )): + - * / % with the usual precedence, unary minus, parentheses, and names
// read as their variable's integer value. nullopt on an unset name (listed in `missing`), a non-integer,
// division by zero or overflow.
struct arith_reader {
  const std::string& s;
  const var_map& vars;
  std::size_t i = 0;
  int depth = 0;
  bool ok = true;
  std::vector<std::string> missing;

  std::optional<std::int64_t> read() {
    const std::int64_t v = sum();
    skip();
    if (!ok || i != s.size()) return std::nullopt;
    return v;
  }
  void skip() {
    while (i < s.size() && blank(s[i])) ++i;
  }
  std::int64_t fail() { return ok = false, 0; }
  std::int64_t sum() {
    std::int64_t v = product();
    for (skip(); ok && i < s.size() && (s[i] == '+' || s[i] == '-'); skip()) {
      const char op = s[i++];
      const std::int64_t r = product();
      if (op == '+' ? __builtin_add_overflow(v, r, &v) : __builtin_sub_overflow(v, r, &v)) return fail();
    }
    return v;
  }
  std::int64_t product() {
    std::int64_t v = unary();
    for (skip(); ok && i < s.size() && (s[i] == '*' || s[i] == '/' || s[i] == '%'); skip()) {
      const char op = s[i++];
      const std::int64_t r = unary();
      if (op == '*') {
        if (__builtin_mul_overflow(v, r, &v)) return fail();
      } else {
        if (r == 0 || (v == INT64_MIN && r == -1)) return fail();
        v = op == '/' ? v / r : v % r;
      }
    }
    return v;
  }
  std::int64_t unary() {
    skip();
    if (++depth > max_depth) return fail();
    std::int64_t v = 0;
    if (i < s.size() && (s[i] == '-' || s[i] == '+')) {
      const bool neg = s[i++] == '-';
      v = unary();
      if (neg && (v == INT64_MIN ? (fail(), true) : (v = -v, false))) return 0;
    } else if (i < s.size() && s[i] == '(') {
      ++i;
      v = sum();
      skip();
      if (i >= s.size() || s[i] != ')') return fail();
      ++i;
    } else if (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) {
      const auto r = std::from_chars(s.data() + i, s.data() + s.size(), v);
      if (r.ec != std::errc()) return fail();
      i = static_cast<std::size_t>(r.ptr - s.data());
    } else if (i < s.size() && name_start(s[i])) {
      std::size_t e = i;
      while (e < s.size() && name_char(s[e])) ++e;
      const std::string name = s.substr(i, e - i);
      i = e;
      const auto it = vars.find(name);
      if (it == vars.end() || it->second.items.empty() || !it->second.items[0].unresolved.empty()) {
        missing.push_back(name);
        return fail();
      }
      const std::string& t = it->second.items[0].text;
      const auto r = std::from_chars(t.data(), t.data() + t.size(), v);
      if (r.ec != std::errc() || r.ptr != t.data() + t.size()) return fail();
    } else {
      return fail();
    }
    --depth;
    return v;
  }
};
}  // namespace

std::size_t group_end(const std::string& s, std::size_t open, const std::string& origin) {
  const char o = s[open], c = o == '(' ? ')' : '}';
  int depth = 0;
  for (std::size_t i = open; i < s.size(); ++i) {
    const char ch = s[i];
    if (ch == '\\') {
      ++i;
    } else if (ch == '\'' && o == '(') {
      i = s.find('\'', i + 1);
      if (i == std::string::npos) break;
    } else if (ch == o) {
      ++depth;
    } else if (ch == c && --depth == 0) {
      return i + 1;
    }
  }
  throw bad_input(origin, std::string("unterminated '") + (o == '(' ? "$(" : "${") + "'");
}

std::size_t dquote_end(const std::string& s, std::size_t open, const std::string& origin) {
  for (std::size_t i = open + 1; i < s.size(); ++i) {
    if (s[i] == '\\')
      ++i;
    else if (s[i] == '"')
      return i + 1;
    else if (s[i] == '$' && i + 1 < s.size() && (s[i + 1] == '(' || s[i + 1] == '{'))
      i = group_end(s, i + 1, origin) - 1;
  }
  throw bad_input(origin, "unterminated '\"'");
}

// The words being built: `cur` is open until a blank of an unquoted expansion (or an array item) ends it.
struct expander::builder {
  bool split;
  std::vector<shell_word> out;
  shell_word cur;
  bool has = false;  // cur exists even if empty ("" is a word)

  void text(const std::string& t) {
    cur.text += t;
    has = has || !t.empty();
  }
  void mark(const std::string& name) {
    cur.text += "${" + name + "}";
    cur.unresolved.push_back(name);
    has = true;
  }
  void end() {
    if (has) out.push_back(std::move(cur));
    cur = {};
    has = false;
  }
  void value(const shell_word& w, bool quoted) {
    if (quoted || !split) {
      cur.text += w.text;
      cur.unresolved.insert(cur.unresolved.end(), w.unresolved.begin(), w.unresolved.end());
      has = has || quoted || !w.text.empty();
      return;
    }
    const std::string& s = w.text;
    for (std::size_t i = 0; i < s.size();) {
      if (blank(s[i])) {
        end();
        while (i < s.size() && blank(s[i])) ++i;
        continue;
      }
      std::size_t e = i;
      while (e < s.size() && !blank(s[e])) ++e;
      const std::string piece = s.substr(i, e - i);
      text(piece);
      for (const auto& n : w.unresolved)  // each piece keeps the references it shows
        if (piece.find("${" + n + "}") != std::string::npos) cur.unresolved.push_back(n);
      i = e;
    }
  }
};

void expander::note(const std::string& n) const {
  for (const auto& x : m_notes)
    if (x == n) return;
  m_notes.push_back(n);
}

void expander::scan(const std::string& s, bool dq, builder& b, int depth) const {
  if (depth > max_depth) throw bad_input(script, "expansions nested too deeply");
  for (std::size_t i = 0; i < s.size();) {
    const char c = s[i];
    if (!dq && c == '\'') {
      const std::size_t e = s.find('\'', i + 1);
      if (e == std::string::npos) throw bad_input(script, "unterminated \"'\"");
      b.text(s.substr(i + 1, e - i - 1));
      b.has = true;
      i = e + 1;
    } else if (!dq && c == '"') {
      const std::size_t e = dquote_end(s, i, script);
      scan(s.substr(i + 1, e - i - 2), true, b, depth + 1);
      b.has = true;
      i = e;
    } else if (c == '\\') {
      if (i + 1 >= s.size()) {
        b.text("\\"), ++i;
        continue;
      }
      const char n = s[i + 1];
      b.text(!dq || std::strchr("$\"\\`", n) ? std::string(1, n) : s.substr(i, 2));
      i += 2;
    } else if (c == '$') {
      i = dollar(s, i, dq, b, depth);
    } else if (c == '`') {
      const std::size_t e = s.find('`', i + 1);
      b.mark("$(...)");
      i = e == std::string::npos ? s.size() : e + 1;
    } else {
      b.text(std::string(1, c)), ++i;
    }
  }
}

std::size_t expander::dollar(const std::string& s, std::size_t i, bool dq, builder& b, int depth) const {
  const std::size_t n = i + 1;
  if (n >= s.size()) return b.text("$"), n;
  if (s.compare(i, 3, "$((") == 0) {
    const std::size_t e = group_end(s, n, script);
    b.value(arith(s.substr(i + 3, e - i - 5), depth + 1), true);
    return e;
  }
  if (s[n] == '(') return b.mark("$(...)"), group_end(s, n, script);
  if (s[n] == '{') {
    const std::size_t e = group_end(s, n, script);
    brace(s.substr(n + 1, e - n - 2), dq, b, depth + 1);
    return e;
  }
  if (std::isdigit(static_cast<unsigned char>(s[n])) || std::strchr("@*#?$!-", s[n]))
    return b.mark(std::string(1, s[n])), n + 1;  // positional and special parameters: never set by the text
  if (!name_start(s[n])) return b.text("$"), n;
  std::size_t e = n;
  while (e < s.size() && name_char(s[e])) ++e;
  brace(s.substr(n, e - n), dq, b, depth + 1);
  return e;
}

void expander::brace(const std::string& content, bool dq, builder& b, int depth) const {
  std::size_t e = 0;
  if (!content.empty() && std::isdigit(static_cast<unsigned char>(content[0])))
    while (e < content.size() && std::isdigit(static_cast<unsigned char>(content[e]))) ++e;
  else if (!content.empty() && name_start(content[0]))
    while (e < content.size() && name_char(content[e])) ++e;
  if (e == 0) return b.mark(content);  // ${#X}, ${!X} and the like are not read
  const std::string name = content.substr(0, e), rest = content.substr(e);
  const auto it = std::isdigit(static_cast<unsigned char>(name[0])) ? m_vars.end() : m_vars.find(name);
  const shell_variable* v = it == m_vars.end() ? nullptr : &it->second;
  const bool empty = !v || v->items.empty() || (v->items.size() == 1 && v->items[0].text.empty());
  if (rest.empty() || rest == "[0]") {
    if (!v) return b.mark(name);
    if (!v->items.empty()) b.value(v->items[0], dq);
    return;
  }
  if (rest == "[@]" || rest == "[*]") {
    if (!v) return b.mark(name);
    for (std::size_t k = 0; k < v->items.size(); ++k) {
      if (k > 0) {
        if (rest == "[*]" && dq)
          b.text(" ");
        else
          b.end(), b.has = dq;
      }
      b.value(v->items[k], dq);
    }
    return;
  }
  for (const char* op : {":-", ":=", ":+", "-", "=", "+"}) {
    if (!rest.starts_with(op)) continue;
    const std::string word = rest.substr(std::strlen(op));
    const bool colon = op[0] == ':';
    const bool unset = !v || (colon && empty);
    const char kind = op[colon ? 1 : 0];
    if (kind == '+') {
      if (!unset) scan(word, dq, b, depth + 1);
      return;
    }
    if (!unset) return b.value(v->items[0], dq);
    if (kind == '=') m_vars[name] = {{expand_joined(word)}, false};
    scan(word, dq, b, depth + 1);
    return;
  }
  b.mark(content);  // pattern substitutions and other forms are not read
}

shell_word expander::arith(const std::string& inner, int depth) const {
  builder b{false, {}, {}, false};
  scan(inner, true, b, depth);
  const shell_word w = b.cur;
  const shell_word unknown{"$((" + inner + "))",
                           w.unresolved.empty() ? std::vector<std::string>{"$((...))"} : w.unresolved};
  if (!w.unresolved.empty()) return unknown;
  arith_reader r{w.text, m_vars, 0, 0, true, {}};
  const auto v = r.read();
  if (!v) return {unknown.text, r.missing.empty() ? unknown.unresolved : r.missing};
  return {std::to_string(*v), {}};
}

std::vector<shell_word> expander::expand(const std::string& raw, bool split) const {
  builder b{split, {}, {}, false};
  scan(raw, false, b, 0);
  b.end();
  return b.out;
}

shell_word expander::expand_joined(const std::string& raw) const {
  shell_word w;
  for (const auto& part : expand(raw, false)) {
    if (!w.text.empty()) w.text += ' ';
    w.text += part.text;
    w.unresolved.insert(w.unresolved.end(), part.unresolved.begin(), part.unresolved.end());
  }
  return w;
}

std::vector<shell_word> expander::expand_plain(const std::string& s) const {
  builder b{false, {}, {}, false};
  for (std::size_t i = 0; i < s.size();)
    if (s[i] == '$')
      i = dollar(s, i, true, b, 0);
    else
      b.text(std::string(1, s[i++]));
  std::vector<shell_word> out;
  const std::string& t = b.cur.text;
  for (std::size_t i = 0; i < t.size();) {
    if (blank(t[i])) {
      ++i;
      continue;
    }
    std::size_t e = i;
    while (e < t.size() && !blank(t[e])) ++e;
    shell_word w{t.substr(i, e - i), {}};
    for (const auto& n : b.cur.unresolved)
      if (w.text.find("${" + n + "}") != std::string::npos) w.unresolved.push_back(n);
    out.push_back(std::move(w));
    i = e;
  }
  return out;
}

void expander::assign(const std::string& name, std::vector<shell_word> items, bool array, bool append) {
  shell_variable& v = m_vars[name];
  if (!append)
    v = {std::move(items), array};
  else if (array || v.array)
    v.items.insert(v.items.end(), items.begin(), items.end()), v.array = true;
  else if (v.items.empty())
    v.items = std::move(items);
  else {
    v.items[0].text += items.at(0).text;
    v.items[0].unresolved.insert(v.items[0].unresolved.end(), items[0].unresolved.begin(),
                                 items[0].unresolved.end());
  }
  // A variable that doubles itself ("A=$A$A" thirty times) would take gigabytes: bounded here (the importer
  // fuzz target found it). No launch script holds a variable of a mebibyte or 100,000 words.
  std::size_t bytes = 0;
  for (const auto& w : v.items) bytes += w.text.size();
  if (bytes > (std::size_t{1} << 20) || v.items.size() > 100'000)
    throw bad_input(name.substr(0, 60), "this variable grows beyond 1 MiB or 100,000 words");
}

bool expander::test(const std::vector<std::string>& words) const {
  std::vector<std::string> w;
  std::string shown;
  for (const auto& raw : words) {
    if (raw == "[" || raw == "]" || raw == "[[" || raw == "]]" || raw == "test") continue;
    shell_word x = expand_joined(raw);
    for (const auto& n : x.unresolved) note("$" + n + " is not set in the text: an if-test read it as empty");
    if (!x.unresolved.empty()) x.text.clear();
    shown += (shown.empty() ? "" : " ") + raw;
    w.push_back(x.text);
  }
  const bool negate = !w.empty() && w[0] == "!";
  if (negate) w.erase(w.begin());
  const auto undecided = [&] {
    note("the test '" + printable(shown, 80) + "' was not evaluated: its branch was skipped");
    return false;
  };
  bool r = false;
  if (w.size() == 1) {
    r = !w[0].empty();
  } else if (w.size() == 2 && (w[0] == "-n" || w[0] == "-z")) {
    r = (w[0] == "-n") == !w[1].empty();
  } else if (w.size() == 3 && (w[1] == "=" || w[1] == "==" || w[1] == "!=")) {
    if (w[2].find_first_of("*?[") != std::string::npos) return undecided();
    r = (w[1] == "!=") != (w[0] == w[2]);
  } else if (w.size() == 3 && w[1].size() == 3 && w[1][0] == '-') {
    std::int64_t a = 0, c = 0;
    const auto num = [](const std::string& t, std::int64_t& v) {
      const auto q = std::from_chars(t.data(), t.data() + t.size(), v);
      return q.ec == std::errc() && q.ptr == t.data() + t.size();
    };
    if (!num(w[0], a) || !num(w[2], c)) return undecided();
    const std::string& op = w[1];
    if (op == "-eq")
      r = a == c;
    else if (op == "-ne")
      r = a != c;
    else if (op == "-lt")
      r = a < c;
    else if (op == "-le")
      r = a <= c;
    else if (op == "-gt")
      r = a > c;
    else if (op == "-ge")
      r = a >= c;
    else
      return undecided();
  } else {
    return undecided();
  }
  return negate ? !r : r;
}

}  // namespace headroom::detail
