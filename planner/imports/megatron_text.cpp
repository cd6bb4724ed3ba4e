// megatron_text.cpp: the bash and YAML reader behind megatron_text.hpp. Bash is read as launch scripts write
// it (Megatron-LM examples/gpt3/train_gpt3_175b_distributed.sh, examples/mixtral/..., ModelZoo's
// sbatch_benchmarking.sh): words, quotes, `\` continuations, NAME=value, NAME=( ... ), NAME+=( ... ),
// ${NAME:-default}, ${ARR[@]}, $((arithmetic)), if/elif/else/fi on [ ] / [[ ]] tests. Loops, case and
// functions are skipped with a note; command substitutions stay unresolved.
#include "planner/imports/megatron_text.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <optional>

#include "planner/errors.hpp"
#include "planner/format.hpp"
#include "planner/imports/shell_expand.hpp"

namespace headroom::detail {
namespace {

struct token {
  enum kind_t { word, op, newline } kind;
  std::string text;
  int line;
};

class lexer {
 public:
  lexer(const std::string& s, const std::string& origin) : m_s(s), m_origin(origin) {}
  std::vector<token> run() {
    while (m_i < m_s.size()) step();
    flush();
    return m_out;
  }

 private:
  const std::string& m_s;
  const std::string& m_origin;
  std::size_t m_i = 0;
  int m_line = 1;
  std::string m_cur;
  bool m_in_word = false, m_drop_next = false;
  std::vector<std::string> m_heredocs;
  std::vector<token> m_out;

  void flush() {
    if (!m_in_word) return;
    if (m_drop_next)
      m_drop_next = false;  // a redirection's target
    else
      m_out.push_back({token::word, m_cur, m_line});
    m_cur.clear();
    m_in_word = false;
  }
  void take(std::size_t end) {  // appends s[m_i, end) to the word
    m_line += static_cast<int>(
        std::count(m_s.begin() + static_cast<long>(m_i), m_s.begin() + static_cast<long>(end), '\n'));
    m_cur.append(m_s, m_i, end - m_i);
    m_in_word = true;
    m_i = end;
  }
  void skip_heredocs() {
    for (const auto& delim : m_heredocs) {
      while (m_i < m_s.size()) {
        std::size_t e = m_s.find('\n', m_i);
        if (e == std::string::npos) e = m_s.size();
        std::string line = m_s.substr(m_i, e - m_i);
        m_i = std::min(e + 1, m_s.size());
        ++m_line;
        line.erase(0, line.find_first_not_of(" \t"));
        if (line == delim) break;
      }
    }
    m_heredocs.clear();
  }
  void redirect() {
    const bool fd =
        m_in_word && std::all_of(m_cur.begin(), m_cur.end(), [](unsigned char c) { return std::isdigit(c); });
    if (fd) m_cur.clear(), m_in_word = false;
    flush();
    if (m_s.compare(m_i, 2, "<<") == 0) {
      m_i += 2;
      if (m_i < m_s.size() && m_s[m_i] == '-') ++m_i;
      while (m_i < m_s.size() && (m_s[m_i] == ' ' || m_s[m_i] == '\t')) ++m_i;
      std::string d;
      while (m_i < m_s.size() && !std::isspace(static_cast<unsigned char>(m_s[m_i])) && m_s[m_i] != ';')
        d += m_s[m_i++];
      d.erase(std::remove_if(d.begin(), d.end(), [](char c) { return c == '\'' || c == '"'; }), d.end());
      m_heredocs.push_back(d);
      return;
    }
    ++m_i;
    if (m_i < m_s.size() && (m_s[m_i] == '>' || m_s[m_i] == '&')) ++m_i;
    m_drop_next = true;
  }
  void step() {
    const char c = m_s[m_i];
    const char n = m_i + 1 < m_s.size() ? m_s[m_i + 1] : '\0';
    if (c == '\\' && n == '\n') {
      m_i += 2, ++m_line;
    } else if (c == '\\' && n == '\r' && m_i + 2 < m_s.size() && m_s[m_i + 2] == '\n') {
      m_i += 3, ++m_line;  // a script saved with CRLF line ends: a backslash before CR LF continues the line
    } else if (c == '\\') {
      take(std::min(m_i + 2, m_s.size()));
    } else if (c == '\'') {
      const std::size_t e = m_s.find('\'', m_i + 1);
      if (e == std::string::npos)
        throw bad_input(m_origin, "unterminated \"'\" on line " + std::to_string(m_line));
      take(e + 1);
    } else if (c == '"') {
      take(dquote_end(m_s, m_i, m_origin));
    } else if (c == '$' && (n == '(' || n == '{')) {
      take(group_end(m_s, m_i + 1, m_origin));
    } else if (c == '`') {
      const std::size_t e = m_s.find('`', m_i + 1);
      if (e == std::string::npos)
        throw bad_input(m_origin, "unterminated '`' on line " + std::to_string(m_line));
      take(e + 1);
    } else if (c == '#' && !m_in_word) {
      m_i = std::min(m_s.find('\n', m_i), m_s.size());
    } else if (c == ' ' || c == '\t' || c == '\r') {
      flush(), ++m_i;
    } else if (c == '\n') {
      flush();
      m_out.push_back({token::newline, "", m_line});
      ++m_i, ++m_line;
      skip_heredocs();
    } else if (c == '>' || c == '<' || (c == '&' && n == '>')) {
      redirect();
    } else if (c == ';' || c == '&' || c == '|' || c == '(' || c == ')') {
      flush();
      const bool two = (c == '&' || c == '|' || c == ';') && n == c;
      m_out.push_back({token::op, m_s.substr(m_i, two ? 2 : 1), m_line});
      m_i += two ? 2 : 1;
    } else {
      take(m_i + 1);
    }
  }
};

bool is_name(const std::string& s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  return std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isalnum(c) || c == '_'; });
}
// Returns the name of an assignment word ("NAME=..." or "NAME+=..."), or "" when `w` is not one.
std::string assigned_name(const std::string& w, bool* append) {
  const std::size_t eq = w.find('=');
  if (eq == std::string::npos || eq == 0) return "";
  *append = w[eq - 1] == '+';
  const std::string name = w.substr(0, *append ? eq - 1 : eq);
  return is_name(name) ? name : "";
}

// One simple command: its raw words, and the array literals that follow NAME=( ... ).
struct command {
  std::vector<std::string> words;
  std::map<std::size_t, std::vector<std::string>> arrays;  // index in words -> the literal's raw words
  std::string end;                                         // the operator that ended it ("" at end)
  int line = 0;
};

class runner {
 public:
  runner(var_map& vars, launch_text& out, const std::string& origin)
      : m_vars(vars), m_out(out), m_origin(origin), m_x(vars, out.notes) {}

  // Returns whether a command running a .py script was found.
  bool run(const std::vector<token>& toks) {
    m_toks = &toks;
    std::size_t i = 0;
    while (i < toks.size() && !m_exit) {
      command c = read_command(i);
      if (!c.words.empty()) dispatch(c, i);
    }
    return m_found;
  }
  std::vector<shell_word> bare_args;
  // A command that runs another script with --flag arguments (ModelZoo's best_practice/*/run_*.sh run
  // `TP=2 PP=8 ... bash ./sbatch_benchmarking.sh --recompute-granularity selective ...`): what the refusal
  // points to when no pretrain_gpt.py command is found.
  struct wrapped_script {
    std::string script;  // its file name
    int line = 0;
    std::size_t flags = 0;              // --flag words after it
    std::vector<std::string> assigned;  // the variables the command sets for it
  };
  std::optional<wrapped_script> wrapper;

 private:
  struct frame {
    bool parent, taken, active;
  };
  var_map& m_vars;
  launch_text& m_out;
  const std::string& m_origin;
  expander m_x;
  const std::vector<token>* m_toks = nullptr;
  std::vector<frame> m_stack;
  bool m_found = false, m_found_pretrain = false, m_exit = false;

  bool active() const { return m_stack.empty() || m_stack.back().active; }

  command read_command(std::size_t& i) {
    const auto& t = *m_toks;
    command c;
    c.line = i < t.size() ? t[i].line : 0;
    while (i < t.size()) {
      const token& k = t[i];
      if (k.kind == token::word) {
        bool app = false;
        const bool opens = i + 1 < t.size() && t[i + 1].kind == token::op && t[i + 1].text == "(";
        if (opens && !assigned_name(k.text, &app).empty() && k.text.back() == '=') {
          std::vector<std::string> items;
          for (i += 2; i < t.size() && !(t[i].kind == token::op && t[i].text == ")"); ++i)
            if (t[i].kind == token::word) items.push_back(t[i].text);
          if (i >= t.size())
            throw bad_input(m_origin, "unterminated array on line " + std::to_string(k.line));
          c.arrays[c.words.size()] = items;
        }
        c.words.push_back(k.text);
        ++i;
        continue;
      }
      ++i;
      if (k.kind == token::op && (k.text == "(" || k.text == ")")) {
        c.words.push_back(k.text);  // a function definition or a subshell: dispatch() skips it
        continue;
      }
      c.end = k.kind == token::newline ? "\n" : k.text;
      if (!c.words.empty() || k.kind == token::op) break;
    }
    return c;
  }

  // Skips commands up to the one that starts with a word in `closers`, counting nested `openers`.
  void skip_block(std::size_t& i, const std::vector<std::string>& openers,
                  const std::vector<std::string>& closers, const command& start, const std::string& what) {
    int depth = 1;
    while (i < m_toks->size() && depth > 0) {
      command c = read_command(i);
      if (c.words.empty()) continue;
      const std::string& w = c.words[0];
      if (std::find(openers.begin(), openers.end(), w) != openers.end()) ++depth;
      if (std::find(closers.begin(), closers.end(), w) != closers.end()) --depth;
    }
    if (active())
      m_out.notes.push_back(what + " on line " + std::to_string(start.line) + " was not evaluated");
  }

  void dispatch(command& c, std::size_t& i) {
    std::string w0 = c.words[0];
    if (w0 == "then" || w0 == "do" || w0 == "else" || w0 == "{") {
      if (w0 == "else") on_else();
      c.words.erase(c.words.begin());
      std::map<std::size_t, std::vector<std::string>> shifted;
      for (auto& [k, v] : c.arrays) shifted[k - 1] = std::move(v);
      c.arrays = std::move(shifted);
      if (c.words.empty()) return;
      w0 = c.words[0];
    }
    if (w0 == "if" || w0 == "elif") return on_if(c, i, w0 == "elif");
    if (w0 == "fi") {
      if (!m_stack.empty()) m_stack.pop_back();
      return;
    }
    if (w0 == "for" || w0 == "while" || w0 == "until" || w0 == "select")
      return skip_block(i, {"for", "while", "until", "select"}, {"done"}, c, "a '" + w0 + "' loop");
    if (w0 == "case") return skip_block(i, {"case"}, {"esac"}, c, "a 'case' statement");
    if (w0 == "function" || (c.words.size() >= 3 && c.words[1] == "(" && c.words[2] == ")"))
      return skip_block(i, {"{"}, {"}"}, c,
                        "the function '" + (w0 == "function" && c.words.size() > 1 ? c.words[1] : w0) + "'");
    if (active()) execute(c);
  }

  void on_if(command& c, std::size_t& i, bool elif) {
    // The condition runs to the command that starts with `then`; && and || join its tests.
    std::vector<std::vector<std::string>> tests{{c.words.begin() + 1, c.words.end()}};
    std::vector<std::string> joins;
    std::string end = c.end;
    while (i < m_toks->size()) {
      if (end == "&&" || end == "||") joins.push_back(end), tests.emplace_back();
      command n = read_command(i);
      if (!n.words.empty() && n.words[0] == "then") {
        n.words.erase(n.words.begin());
        if (!n.words.empty()) {
          push_branch(tests, joins, elif);
          if (active()) execute(n);
          return;
        }
        break;
      }
      tests.back().insert(tests.back().end(), n.words.begin(), n.words.end());
      end = n.end;
    }
    push_branch(tests, joins, elif);
  }
  void push_branch(const std::vector<std::vector<std::string>>& tests, const std::vector<std::string>& joins,
                   bool elif) {
    frame f{active(), false, false};
    if (elif && !m_stack.empty()) f = m_stack.back(), m_stack.pop_back();
    bool value = false;
    if (f.parent && !f.taken) {
      value = m_x.test(tests[0]);
      for (std::size_t k = 0; k < joins.size(); ++k)
        value = joins[k] == "&&" ? value && m_x.test(tests[k + 1]) : value || m_x.test(tests[k + 1]);
    }
    f.active = f.parent && !f.taken && value;
    f.taken = f.taken || f.active;
    m_stack.push_back(f);
  }
  void on_else() {
    if (m_stack.empty()) return;
    frame& f = m_stack.back();
    f.active = f.parent && !f.taken;
    f.taken = true;
  }

  void execute(const command& c) {
    std::size_t k = 0;
    static const std::vector<std::string> builtins{"export", "declare", "local", "readonly", "typeset"};
    if (std::find(builtins.begin(), builtins.end(), c.words[0]) != builtins.end()) {
      ++k;
      while (k < c.words.size() && c.words[k].starts_with("-")) ++k;
    }
    std::vector<std::string> assigned;
    for (; k < c.words.size(); ++k) {
      bool append = false;
      const std::string name = assigned_name(c.words[k], &append);
      if (name.empty()) break;
      assigned.push_back(name);
      const auto arr = c.arrays.find(k);
      if (arr != c.arrays.end()) {
        std::vector<shell_word> items;
        for (const auto& raw : arr->second) {
          auto v = m_x.expand(raw, true);
          items.insert(items.end(), v.begin(), v.end());
        }
        m_x.assign(name, items, true, append);
      } else {
        const std::string raw = c.words[k].substr(c.words[k].find('=') + 1);
        m_x.assign(name, {m_x.expand_joined(raw)}, false, append);
      }
    }
    if (k >= c.words.size() || c.words[0] == "export" || c.words[0] == "declare") return;
    if (c.words[k] == "exit" && m_stack.empty()) m_exit = true;
    if (c.words[k] == "unset") {
      for (std::size_t j = k + 1; j < c.words.size(); ++j) m_vars.erase(c.words[j]);
      return;
    }
    std::vector<shell_word> words;
    for (std::size_t j = k; j < c.words.size(); ++j) {
      auto v = m_x.expand(c.words[j], true);
      words.insert(words.end(), v.begin(), v.end());
    }
    take_launch(words);
    if (!m_found) note_wrapper(words, c.line, assigned);
  }

  void note_wrapper(const std::vector<shell_word>& words, int line,
                    const std::vector<std::string>& assigned) {
    for (std::size_t j = 0; j < words.size() && !wrapper; ++j) {
      if (!words[j].text.ends_with(".sh")) continue;
      const std::size_t flags = static_cast<std::size_t>(
          std::count_if(words.begin() + static_cast<long>(j) + 1, words.end(),
                        [](const shell_word& w) { return w.text.starts_with("--"); }));
      const std::string& w = words[j].text;
      if (flags > 0)
        wrapper = {w.substr(w.find_last_of('/') == std::string::npos ? 0 : w.find_last_of('/') + 1), line,
                   flags, assigned};
    }
  }

  void take_launch(const std::vector<shell_word>& words) {
    for (std::size_t j = 0; j < words.size(); ++j) {
      const std::string& w = words[j].text;
      if (!w.ends_with(".py")) continue;
      const std::string base =
          w.substr(w.find_last_of('/') == std::string::npos ? 0 : w.find_last_of('/') + 1);
      const bool pretrain = base.starts_with("pretrain");
      if (m_found && (m_found_pretrain || !pretrain)) return;
      m_found = true;
      m_found_pretrain = pretrain;
      m_out.launcher.assign(words.begin(), words.begin() + static_cast<long>(j));
      m_out.args.assign(words.begin() + static_cast<long>(j) + 1, words.end());
      return;
    }
    if (!words.empty() && words[0].text.starts_with("--"))
      bare_args.insert(bare_args.end(), words.begin(), words.end());
  }
};

// Returns whether `text` is ModelZoo's YAML: its first line that is not blank or a comment is a section
// ("MODEL_ARGS:") or a "--flag: value" entry.
bool looks_like_yaml(const std::string& text) {
  std::size_t at = 0;
  while (at < text.size()) {
    std::size_t e = text.find('\n', at);
    if (e == std::string::npos) e = text.size();
    std::string line = text.substr(at, e - at);
    at = e + 1;
    while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.pop_back();
    const std::size_t f = line.find_first_not_of(" \t");
    if (f == std::string::npos || line[f] == '#') continue;
    line.erase(0, f);
    const std::size_t colon = line.find(':');
    if (colon == std::string::npos) return false;
    const std::string key = line.substr(0, colon);
    if (colon + 1 == line.size() && is_name(key)) return true;  // a section: MODEL_ARGS:
    const bool flag = key.size() > 2 && key.starts_with("--") &&
                      std::all_of(key.begin() + 2, key.end(),
                                  [](unsigned char c) { return std::isalnum(c) || c == '-' || c == '_'; });
    return flag && (colon + 1 == line.size() || line[colon + 1] == ' ' || line[colon + 1] == '\t');
  }
  return false;
}

// sbatch_benchmarking.sh (yanring/Megatron-MoE-ModelZoo @ e8650517, l.75-82) appends the dispatcher's flags
// after the YAML's, by DISPATCHER: alltoall, deepep (its default) or hybridep. Stated (--megatron-var
// DISPATCHER=deepep), the same flags are appended here; unset, the YAML's own flag is read and a note says so.
void append_dispatcher(const var_map& vars, launch_text& out) {
  const auto it = vars.find("DISPATCHER");
  const bool moe = std::any_of(out.args.begin(), out.args.end(),
                               [](const shell_word& w) { return w.text == "--num-experts"; });
  if (it == vars.end() || it->second.items.empty()) {
    if (moe)
      out.notes.push_back(
          "DISPATCHER not set: the YAML's own --moe-token-dispatcher-type is read (sbatch_benchmarking.sh "
          "l.75-82 appends flex with deepep unless DISPATCHER says otherwise; --megatron-var "
          "DISPATCHER=...)");
    return;
  }
  const std::string d = it->second.items[0].text;
  std::vector<std::string> add;
  if (d == "alltoall") add = {"--moe-token-dispatcher-type", "alltoall"};
  if (d == "deepep") add = {"--moe-token-dispatcher-type", "flex", "--moe-flex-dispatcher-backend", "deepep"};
  if (d == "hybridep")
    add = {"--moe-token-dispatcher-type", "flex", "--moe-flex-dispatcher-backend", "hybridep",
           "--moe-hybridep-num-sms",      "32"};
  if (add.empty())
    throw bad_input(
        "--megatron-var DISPATCHER",
        "'" + printable(d, 40) + "' is not one sbatch_benchmarking.sh knows: alltoall, deepep or hybridep");
  for (const auto& w : add) out.args.push_back({w, {}});
  out.notes.push_back("DISPATCHER=" + d +
                      ": the flags sbatch_benchmarking.sh l.75-82 appends after the YAML's");
}

// Returns the value of the word after flag `f` in `args` ("" when absent).
std::string value_of(const std::vector<shell_word>& args, const char* f) {
  for (std::size_t i = 0; i + 1 < args.size(); ++i)
    if (args[i].text == f) return args[i + 1].text;
  return "";
}

// sbatch_benchmarking.sh l.63-67: when the layers do not divide over PP and no layout string is given, it
// appends --decoder-first/last-pipeline-num-layers from PP_FIRST and PP_LAST (runtime.conf's last columns).
void append_uneven_split(const var_map& vars, launch_text& out) {
  const std::string layers = value_of(out.args, "--num-layers"),
                    pp = value_of(out.args, "--pipeline-model-parallel-size");
  const auto whole = [](const std::string& v) {
    return !v.empty() && v.size() < 7 && v.find_first_not_of("0123456789") == std::string::npos;
  };
  if (!whole(layers) || !whole(pp) || std::stoll(pp) == 0 || std::stoll(layers) % std::stoll(pp) == 0 ||
      !value_of(out.args, "--pipeline-model-parallel-layout").empty())
    return;
  for (const auto& [var, flag] : {std::pair{"PP_FIRST", "--decoder-first-pipeline-num-layers"},
                                  std::pair{"PP_LAST", "--decoder-last-pipeline-num-layers"}}) {
    const auto it = vars.find(var);
    if (it == vars.end() || it->second.items.empty() || !whole(it->second.items[0].text)) continue;
    out.args.push_back({flag, {}});
    out.args.push_back({it->second.items[0].text, {}});
    out.notes.push_back(
        std::string(var) + "=" + it->second.items[0].text + ": " + flag +
        ", as sbatch_benchmarking.sh l.63-67 appends it when the layers do not divide over PP");
  }
}

launch_text read_yaml(const std::string& text, const std::string& origin, var_map& vars) {
  launch_text out;
  out.yaml = true;
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw bad_input(origin, "malformed YAML: line " + std::to_string(e.mark.line + 1) + ": " + e.msg);
  }
  if (!root.IsMap()) throw bad_input(origin, "the YAML is not a mapping of --flag: value");
  YAML::Node args = root["MODEL_ARGS"] ? root["MODEL_ARGS"] : root;
  if (!args.IsMap()) throw bad_input(origin + ".MODEL_ARGS", "is not a mapping of --flag: value");
  if (root["ENV_VARS"] && root["ENV_VARS"].IsMap())
    for (const auto& kv : root["ENV_VARS"])
      if (kv.second.IsScalar()) {
        vars[kv.first.Scalar()] = {{{kv.second.Scalar(), {}}}, false};
        out.env_vars[kv.first.Scalar()] = kv.second.Scalar();
      }
  expander x(vars, out.notes);
  for (const auto& kv : args) {
    const std::string key = kv.first.IsScalar() ? kv.first.Scalar() : "";
    if (!key.starts_with("--")) {
      if (args == root && (key == "ENV_VARS" || key == "MODEL_ARGS")) continue;
      throw bad_input(origin, "'" + printable(key, 60) + "' is not a --flag");
    }
    // sbatch_benchmarking.sh turns `true` into the bare flag, drops `false`, and word-splits the rest.
    std::vector<std::string> values;
    if (kv.second.IsScalar())
      values.push_back(kv.second.Scalar());
    else if (kv.second.IsSequence())
      for (const auto& e : kv.second)
        values.push_back(e.IsScalar() ? e.Scalar()
                                      : throw bad_input(origin + "." + key, "holds a nested value"));
    else if (!kv.second.IsNull())
      throw bad_input(origin + "." + key, "holds a mapping, not a value");
    // envsubst runs before yq there, so a value that becomes `false` once its variables are set drops the
    // flag too (runtime.conf's LAYERS_PER_VP=false without interleaving), and one that becomes `true` is bare.
    std::vector<shell_word> words;
    for (const auto& v : values) {
      auto w = x.expand_plain(v);
      words.insert(words.end(), w.begin(), w.end());
    }
    const bool one_word = values.size() == 1 && words.size() == 1 && words[0].unresolved.empty();
    if (one_word && words[0].text == "false") continue;
    out.args.push_back({key, {}});
    if (one_word && words[0].text == "true") continue;
    out.args.insert(out.args.end(), words.begin(), words.end());
  }
  append_dispatcher(vars, out);
  append_uneven_split(vars, out);
  return out;
}

// Returns the refusal of a script that runs another script with --flag arguments: for ModelZoo's
// sbatch_benchmarking.sh the YAML it launches, model_configs/benchmarking/${MODEL}.yaml (its
// runtime_configs/benchmarking/common.conf l.3), and how to give it the flags and the variables.
std::string wrapper_refusal(const runner::wrapped_script& w, const var_map& vars) {
  const std::string flags = std::to_string(w.flags) + (w.flags == 1 ? " flag" : " flags");
  const std::string set = w.assigned.empty() ? ""
                                             : ", --megatron-var NAME=VALUE for the " +
                                                   std::to_string(w.assigned.size()) + " variables it sets";
  const std::string line = "line " + std::to_string(w.line) + " runs ";
  if (w.script == "sbatch_benchmarking.sh") {
    const auto m = vars.find("MODEL");
    const std::string model =
        m == vars.end() || m->second.items.empty() ? "${MODEL}" : m->second.items[0].text;
    return line + "sbatch_benchmarking.sh, which launches model_configs/benchmarking/" +
           printable(model, 40) + ".yaml: give --megatron-args \"THAT.yaml --flag ...\" (its " + flags + ")" +
           set;
  }
  return line + printable(w.script, 40) + " with " + flags +
         ", not pretrain_gpt.py: give --megatron-args the file it "
         "launches (\"FILE --flag ...\": its " +
         flags + ")" + set;
}

}  // namespace

launch_text read_launch_text(const std::string& text, const std::string& origin,
                             const std::map<std::string, std::string>& env) {
  var_map vars;
  for (const auto& [k, v] : env) vars[k] = {{{v, {}}}, false};
  launch_text out;
  if (looks_like_yaml(text)) {
    out = read_yaml(text, origin, vars);
  } else {
    runner r(vars, out, origin);
    if (!r.run(lexer(text, origin).run())) {
      // The command may sit in a string that a later `bash -c` runs (Megatron-LM's
      // examples/megatron_fsdp/sbatch_mfsdp_deepseek_v3.sh: TRAINING_CMD="... pretrain_gpt.py ${ARGS[@]}").
      bool found = false;
      for (const auto& [name, v] : var_map(vars)) {
        if (v.array || v.items.empty() || v.items[0].text.find(".py") == std::string::npos) continue;
        launch_text inner;
        runner nested(vars, inner, origin);
        if (nested.run(lexer(v.items[0].text, origin + " ($" + name + ")").run())) {
          out.args = inner.args, out.launcher = inner.launcher;
          out.notes.push_back("the command line is the one $" + name + " holds");
          found = true;
          break;
        }
      }
      if (!found) out.args = r.bare_args;
    }
    if (out.args.empty() && out.launcher.empty()) {
      if (r.wrapper) throw bad_input(origin, wrapper_refusal(*r.wrapper, vars));
      throw bad_input(origin,
                      "no pretrain_gpt.py command line and no --flag arguments found: give --megatron-args "
                      "the script that runs pretrain_gpt.py, its command line, or ModelZoo's YAML");
    }
  }
  for (const auto& [k, v] : vars)
    if (!v.array && !v.items.empty()) out.variables[k] = v.items[0];
  return out;
}

}  // namespace headroom::detail
