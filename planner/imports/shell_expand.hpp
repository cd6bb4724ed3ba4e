// shell_expand.hpp: bash word expansion for the launch-script reader (megatron_text.cpp): quotes, escapes,
// $NAME, ${NAME}, ${NAME:-default} and the other default forms, ${ARR[@]}, $((integer arithmetic)), word
// splitting of unquoted expansions, and the [ ] / [[ ]] tests of an if. A reference the text does not set
// stays in the word as ${NAME} and is listed in shell_word::unresolved; a command substitution is never run.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "planner/imports/megatron_text.hpp"

namespace headroom::detail {

struct shell_variable {
  std::vector<shell_word> items;  // one item for a scalar
  bool array = false;
};
using var_map = std::map<std::string, shell_variable>;

// Returns the index just past the group ( ... ) or { ... } that opens at s[open], skipping quoted text.
// Throws bad_input(origin, "unterminated ...") when it does not close.
std::size_t group_end(const std::string& s, std::size_t open, const std::string& origin);
// Returns the index just past the double-quoted string that opens at s[open] (same errors).
std::size_t dquote_end(const std::string& s, std::size_t open, const std::string& origin);

class expander {
 public:
  expander(var_map& vars, std::vector<std::string>& notes) : m_vars(vars), m_notes(notes) {}
  // Returns the words `raw` expands to; split: unquoted expansions are split at blanks (a command's words).
  std::vector<shell_word> expand(const std::string& raw, bool split) const;
  // Returns the one word an assignment's value expands to (array items joined by a space).
  shell_word expand_joined(const std::string& raw) const;
  // Returns the words of a value as envsubst and then word splitting leave it (ModelZoo's YAML values):
  // $NAME and ${...} only, no quotes.
  std::vector<shell_word> expand_plain(const std::string& s) const;
  void assign(const std::string& name, std::vector<shell_word> items, bool array, bool append);
  // Returns the value of the test `words` (raw words of [ ... ], [[ ... ]] or test ...). A variable the text
  // does not set reads as empty, as in bash; a test it cannot decide (files, regexes) is false. Both noted.
  bool test(const std::vector<std::string>& words) const;

 private:
  struct builder;
  var_map& m_vars;
  std::vector<std::string>& m_notes;
  void scan(const std::string& s, bool dq, builder& b, int depth) const;
  std::size_t dollar(const std::string& s, std::size_t i, bool dq, builder& b, int depth) const;
  void brace(const std::string& content, bool dq, builder& b, int depth) const;
  shell_word arith(const std::string& inner, int depth) const;
  void note(const std::string& n) const;
};

}  // namespace headroom::detail
