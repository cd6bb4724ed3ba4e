// pickle_reader.cpp: the pickle subset reader (see pickle_reader.hpp). Opcode names and encodings follow
// CPython's Lib/pickletools.py, the protocol's reference description.
#include "probes/snapshots/pickle_reader.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>

#include "planner/errors.hpp"
#include "planner/large_buffers.hpp"

namespace headroom::probes {

pnode pdoc::at(std::uint32_t id) const {
  const slot& n = nodes[id];
  pnode p;
  p.k = n.k;
  p.wide = n.wide;
  switch (n.k) {
    case pnode::kind::boolean:
    case pnode::kind::integer:
      if (n.wide)
        p.f = std::bit_cast<double>(n.v);
      else
        p.i = static_cast<std::int64_t>(n.v);
      break;
    case pnode::kind::floating:
      p.f = std::bit_cast<double>(n.v);
      break;
    case pnode::kind::string:
    case pnode::kind::bytes:
      p.s = std::string_view(text).substr(static_cast<std::size_t>(n.v), n.n);
      break;
    case pnode::kind::list:
    case pnode::kind::tuple:
    case pnode::kind::dict:
      p.kids = std::span<const std::uint32_t>(items).subspan(static_cast<std::uint32_t>(n.v), n.n);
      break;
    case pnode::kind::none:
      break;
  }
  return p;
}

std::optional<std::uint32_t> pdoc::get(std::uint32_t id, std::string_view key) const {
  const pnode d = at(id);
  if (d.k != pnode::kind::dict) return std::nullopt;
  // The last occurrence wins, as when Python builds the dict.
  for (std::size_t i = d.kids.size(); i >= 2; i -= 2) {
    const slot& k = nodes[d.kids[i - 2]];
    if (k.k == pnode::kind::string && k.n == key.size() &&
        std::string_view(text).substr(static_cast<std::size_t>(k.v), k.n) == key)
      return d.kids[i - 1];
  }
  return std::nullopt;
}

std::optional<std::int64_t> pdoc::integer(std::uint32_t id) const {
  const slot& n = nodes[id];
  if ((n.k == pnode::kind::integer && !n.wide) || n.k == pnode::kind::boolean)
    return static_cast<std::int64_t>(n.v);
  return std::nullopt;
}

std::optional<std::string_view> pdoc::string(std::uint32_t id) const {
  const slot& n = nodes[id];
  if (n.k != pnode::kind::string) return std::nullopt;
  return std::string_view(text).substr(static_cast<std::size_t>(n.v), n.n);
}

bool looks_like_pickle(std::string_view bytes) {
  return bytes.size() >= 2 && static_cast<unsigned char>(bytes[0]) == 0x80 &&
         static_cast<unsigned char>(bytes[1]) >= 2 && static_cast<unsigned char>(bytes[1]) <= 5;
}

namespace {

constexpr std::uint32_t no_node = UINT32_MAX;

// Stores a node; returns its id. The reader checks max_nodes before, the JSON reader is bounded by its
// input size.
std::uint32_t add_node(pdoc& d, pnode::kind k, std::uint64_t v = 0, std::uint32_t n = 0, bool wide = false) {
  d.nodes.push_back({k, wide, n, v});
  return static_cast<std::uint32_t>(d.nodes.size() - 1);
}

std::uint32_t add_text(pdoc& d, pnode::kind k, std::string_view s) {
  const auto at = d.text.size();
  d.text.append(s);
  return add_node(d, k, at, static_cast<std::uint32_t>(s.size()));
}

// Appends `count` children to container `id`. A container's children are one run of `items`: the first
// ones are stored at the end; later ones extend the run in place when it is last, else the run moves to
// the end with room for twice its new length (a growing list costs amortised O(1) a child). Returns false
// when `items` would pass 2^32 entries (the offsets are 32 bits).
bool add_items(pdoc& d, std::uint32_t id, const std::uint32_t* from, std::size_t count) {
  if (count == 0) return true;
  auto& a = d.items;
  pdoc::slot& c = d.nodes[id];
  const std::uint64_t len = c.n;
  std::uint64_t off = c.v & 0xffffffffu, room = c.v >> 32;
  const std::uint64_t want = len + count;
  if (room == 0) {  // the first children (the common case): stored at the end, nothing to move
    if (a.size() + count > UINT32_MAX) return false;
    c.v = a.size() | std::uint64_t{count} << 32;
    c.n = static_cast<std::uint32_t>(count);
    a.insert(a.end(), from, from + count);
    return true;
  }
  if (want > room) {
    if (room == 0 || off + room != a.size()) {
      // First children, or a run others have been stored after: move to the end.
      const std::uint64_t new_room = room == 0 ? want : 2 * want;
      if (a.size() + new_room > UINT32_MAX) return false;
      const std::uint64_t new_off = a.size();
      a.resize(static_cast<std::size_t>(new_off + new_room));
      std::copy_n(a.begin() + static_cast<std::ptrdiff_t>(off), len,
                  a.begin() + static_cast<std::ptrdiff_t>(new_off));
      off = new_off;
      room = new_room;
    } else {
      if (off + want > UINT32_MAX) return false;
      a.resize(static_cast<std::size_t>(off + want));
      room = want;
    }
  }
  std::copy_n(from, count, a.begin() + static_cast<std::ptrdiff_t>(off + len));
  c.n = static_cast<std::uint32_t>(want);
  c.v = off | room << 32;
  return true;
}

// The opcode loop's small readers below are forced inline ([[gnu::always_inline]]): the loop is one large
// function, past the size at which the compiler stops inlining into it by itself.
class reader {
 public:
  reader(std::string_view b, const std::string& origin, const pickle_limits& l)
      : m_b(b), m_origin(origin), m_limits(l) {
    m_small.fill(no_node);
  }

  pdoc run() {
    // Real snapshots hold a value per 11-23 bytes and a child per 4-8; reserving address space is free,
    // only what is written becomes resident.
    reserve_large(m_doc.nodes, std::min<std::size_t>(m_b.size() / 8 + 16, m_limits.max_nodes));
    reserve_large(m_doc.items, std::min<std::size_t>(m_b.size() / 2 + 16, UINT32_MAX));
    // CPython's pickler memoizes every container and string: room for one entry per 16 bytes (real
    // snapshots hold about one per 25; a denser file grows the memo as a vector does).
    reserve_large(m_memo, std::min<std::size_t>(m_b.size() / 16 + 16, m_limits.max_memo));
    m_stack.reserve(4096);
    while (true) {
      if (m_pos >= m_b.size()) fail("truncated: the stream ends before STOP");
      m_op_at = m_pos;
      const auto op = static_cast<unsigned char>(m_b[m_pos++]);
      switch (op) {
        case 0x80: {  // PROTO
          const auto v = u8();
          if (v < 2 || v > 5) fail("protocol " + std::to_string(v) + " (this reader takes 2-5)");
          break;
        }
        case 0x95:  // FRAME: a length hint; the opcodes inside are read as they come
          take(8);
          break;
        case '}':
          push_memoized(make(pnode::kind::dict));
          break;
        case ']':
          push_memoized(make(pnode::kind::list));
          break;
        case ')':
          push(make(pnode::kind::tuple));
          break;
        case 'N':  // None, True, False and small integers are immutable: one node each serves every use
          push(shared(m_none, pnode::kind::none, 0));
          break;
        case 0x88:  // NEWTRUE
          push(shared(m_true, pnode::kind::boolean, 1));
          break;
        case 0x89:  // NEWFALSE
          push(shared(m_false, pnode::kind::boolean, 0));
          break;
        case 'K': {
          const auto v = u8();
          push(shared(m_small[v], pnode::kind::integer, v));
          break;
        }
        case 'M':
          push_int(static_cast<std::int64_t>(le(2)));
          break;
        case 'J':
          push_int(static_cast<std::int32_t>(static_cast<std::uint32_t>(le(4))));
          break;
        case 0x8a:  // LONG1
          push_long(u8());
          break;
        case 0x8b: {  // LONG4
          const auto n = static_cast<std::int32_t>(static_cast<std::uint32_t>(le(4)));
          if (n < 0) fail("LONG4 with a negative length");
          push_long(static_cast<std::uint64_t>(n));
          break;
        }
        case 'G': {  // BINFLOAT: 8 bytes, big-endian IEEE 754
          const std::string_view raw = take(8);
          std::uint64_t bits = 0;
          for (char c : raw) bits = bits << 8 | static_cast<unsigned char>(c);
          push(make(pnode::kind::floating, bits));
          break;
        }
        case 0x8c:
          push_text(pnode::kind::string, u8());
          break;
        case 'X':
          push_text(pnode::kind::string, le(4));
          break;
        case 0x8d:
          push_text(pnode::kind::string, le(8));
          break;
        case 'C':
          push_text(pnode::kind::bytes, u8());
          break;
        case 'B':
          push_text(pnode::kind::bytes, le(4));
          break;
        case 0x8e:
        case 0x96:  // BINBYTES8, BYTEARRAY8
          push_text(pnode::kind::bytes, le(8));
          break;
        case '(':
          if (m_marks.size() >= m_limits.max_depth)
            fail("marks nested deeper than " + std::to_string(m_limits.max_depth) + " (the limit)");
          m_marks.push_back(m_stack.size());
          break;
        case 0x85:
        case 0x86:
        case 0x87: {  // TUPLE1..3
          const std::size_t n = op - 0x84u;
          if (m_stack.size() < n + floor()) fail("TUPLE" + std::to_string(n) + " on a stack too short");
          const auto id = make(pnode::kind::tuple);
          fill(id, m_stack.size() - n);
          push(id);
          break;
        }
        case 't':  // TUPLE from the mark
          push(from_mark(pnode::kind::tuple));
          break;
        case 'l':  // LIST from the mark
          push(from_mark(pnode::kind::list));
          break;
        case 'd': {  // DICT from the mark
          if (!m_marks.empty() && (m_stack.size() - m_marks.back()) % 2)
            fail("DICT with an odd number of items");
          push(from_mark(pnode::kind::dict));
          break;
        }
        case 'a': {  // APPEND
          const auto v = pop();
          const auto to = top();
          if (m_doc.nodes[to].k != pnode::kind::list) fail("APPEND to something that is not a list");
          add(to, &v, 1);
          break;
        }
        case 'e':  // APPENDS
          to_mark_owner(pnode::kind::list, "APPEND to something that is not a list");
          break;
        case 's': {  // SETITEM
          const std::uint32_t value = pop();
          const std::uint32_t key = pop();
          const std::uint32_t pair[2] = {key, value};
          const auto to = top();
          if (m_doc.nodes[to].k != pnode::kind::dict) fail("SETITEM on something that is not a dict");
          add(to, pair, 2);
          break;
        }
        case 'u':  // SETITEMS
          if (!m_marks.empty() && (m_stack.size() - m_marks.back()) % 2)
            fail("SETITEMS with an odd number of items");
          to_mark_owner(pnode::kind::dict, "SETITEM on something that is not a dict");
          break;
        case 0x94:  // MEMOIZE
          memo_put(m_memo_next, top());
          break;
        case 'q':
          memo_put(u8(), top());
          break;
        case 'r':
          memo_put(le(4), top());
          break;
        case 'h':
        case 'j':
          memo_gets(op);
          break;
        case '0':  // POP
          if (!m_marks.empty() && m_marks.back() == m_stack.size())
            m_marks.pop_back();  // POP of a mark, as CPython does
          else
            pop();
          break;
        case '1':  // POP_MARK
          m_stack.resize(pop_mark());
          break;
        case '2':  // DUP
          push(top());
          break;
        case '.': {  // STOP
          if (m_stack.size() != 1 || !m_marks.empty())
            fail("STOP with " + std::to_string(m_stack.size()) + " values on the stack");
          m_doc.root = m_stack.back();
          return std::move(m_doc);
        }
        case 'c':
        case 0x93:
          fail("a global (a class or function reference): headroom never loads code from a pickle");
        case 'R':
        case 'b':
        case 0x81:
        case 0x92:
        case 'i':
        case 'o':
          fail("an object construction (reduce / build / newobj): headroom never executes a pickle");
        case 'P':
        case 'Q':
          fail("a persistent id (an external object): not plain data");
        case 0x82:
        case 0x83:
        case 0x84:
          fail("an extension registry reference: not plain data");
        case 0x8f:
        case 0x90:
        case 0x91:
          fail("a set: snapshots hold none");
        case 0x97:
        case 0x98:
          fail("an out-of-band buffer: not plain data");
        default:
          fail("unknown opcode 0x" + hex(op) + " (this reader takes the binary protocols 2-5)");
      }
    }
  }

 private:
  // Out of line and cold, so the small readers below (take, push, make...) stay small enough to inline.
  [[noreturn, gnu::cold, gnu::noinline]] void fail(const std::string& what) const {
    throw bad_input(m_origin,
                    "not a readable snapshot pickle: " + what + " at byte " + std::to_string(m_op_at));
  }
  [[noreturn, gnu::cold, gnu::noinline]] void fail_count(const char* before, std::uint64_t n,
                                                         const char* after) const {
    fail(before + std::to_string(n) + after);
  }
  static std::string hex(unsigned v) {
    const char* d = "0123456789abcdef";
    return {d[(v >> 4) & 15], d[v & 15]};
  }
  [[gnu::always_inline]] std::string_view take(std::uint64_t n) {
    if (n > m_b.size() - m_pos) fail_count("truncated: ", n, " bytes wanted past the end");
    auto s = m_b.substr(m_pos, static_cast<std::size_t>(n));
    m_pos += static_cast<std::size_t>(n);
    return s;
  }
  [[gnu::always_inline]] std::uint64_t u8() { return static_cast<unsigned char>(take(1)[0]); }
  [[gnu::always_inline]] std::uint64_t le(int n) {
    const std::string_view raw = take(static_cast<std::uint64_t>(n));
    std::uint64_t v = 0;
    for (int k = n - 1; k >= 0; --k)
      v = v << 8 | static_cast<unsigned char>(raw[static_cast<std::size_t>(k)]);
    return v;
  }
  [[gnu::always_inline]] std::uint32_t make(pnode::kind k, std::uint64_t v = 0, std::uint32_t n = 0,
                                            bool wide = false) {
    if (m_doc.nodes.size() >= m_limits.max_nodes)
      fail_count("more than ", m_limits.max_nodes, " values (the limit)");
    return add_node(m_doc, k, v, n, wide);
  }
  // Returns the one node of an immutable value, made on first use.
  std::uint32_t shared(std::uint32_t& cache, pnode::kind k, std::uint64_t v) {
    if (cache == no_node) cache = make(k, v);
    return cache;
  }
  std::size_t floor() const { return m_marks.empty() ? 0 : m_marks.back(); }
  [[gnu::always_inline]] void push(std::uint32_t id) {
    if (m_stack.size() >= m_limits.max_nodes)
      fail_count("a stack deeper than ", m_limits.max_nodes, " values (the limit)");
    m_stack.push_back(id);
  }
  [[gnu::always_inline]] std::uint32_t pop() {
    if (m_stack.size() <= floor()) fail("a value popped from an empty stack");
    const auto v = m_stack.back();
    m_stack.pop_back();
    return v;
  }
  [[gnu::always_inline]] std::uint32_t top() const {
    if (m_stack.size() <= floor()) fail("an operation on an empty stack");
    return m_stack.back();
  }
  // Pops the last mark; returns where its items begin on the stack (they stay there).
  std::size_t pop_mark() {
    if (m_marks.empty()) fail("no mark to pop to");
    const std::size_t at = m_marks.back();
    m_marks.pop_back();
    return at;
  }
  void add(std::uint32_t to, const std::uint32_t* from, std::size_t n) {
    if (!add_items(m_doc, to, from, n)) fail("more than 2^32 container items in all (the limit)");
  }
  // Gives container `id` the stack's items from `at` on, and drops them from the stack.
  void fill(std::uint32_t id, std::size_t at) {
    add(id, m_stack.data() + at, m_stack.size() - at);
    m_stack.resize(at);
  }
  // TUPLE / LIST / DICT: a new container of the items above the last mark.
  std::uint32_t from_mark(pnode::kind k) {
    const std::size_t at = pop_mark();
    const auto id = make(k);
    fill(id, at);
    return id;
  }
  // APPENDS / SETITEMS: the items above the last mark into the container below it.
  void to_mark_owner(pnode::kind k, const char* refused) {
    const std::size_t at = pop_mark();
    if (at <= floor()) fail("an operation on an empty stack");
    const auto to = m_stack[at - 1];
    if (m_doc.nodes[to].k != k) fail(refused);
    fill(to, at);
  }
  // An integer is immutable and a trace's recur (its block addresses and sizes, thousands of times each):
  // one node serves every use of a value while it stays in this direct-mapped table, which keeps a
  // million-event capture's document about a third smaller at one probe a value.
  [[gnu::always_inline]] void push_int(std::int64_t v) {
    const auto h = (static_cast<std::uint64_t>(v) * 0x9e3779b97f4a7c15u) >> (64 - int_cache_bits);
    auto& [value, id] = m_ints[static_cast<std::size_t>(h)];
    if (id == no_node || value != v) {
      id = make(pnode::kind::integer, static_cast<std::uint64_t>(v));
      value = v;
    }
    push(id);
  }

  // LONG1 / LONG4: n bytes, little-endian two's complement. Up to 8 bytes (or 9 with a zero sign byte
  // above a value that still fits) is exact; wider keeps an approximate double and is refused where an
  // integer is needed.
  void push_long(std::uint64_t n) {
    const std::string_view raw = take(n);
    if (n == 0) return push_int(0);
    const bool negative = static_cast<unsigned char>(raw[n - 1]) & 0x80;
    if (n <= 8) {
      std::uint64_t v = 0;
      for (std::size_t k = n; k-- > 0;) v = v << 8 | static_cast<unsigned char>(raw[k]);
      const auto shift = static_cast<unsigned>(64 - 8 * n);  // n >= 1: sign-extends from the top byte read
      return push_int(static_cast<std::int64_t>(v << shift) >> shift);
    }
    double f = 0;
    for (std::size_t k = n; k-- > 0;) {
      const unsigned char byte = static_cast<unsigned char>(raw[k]);
      f = f * 256 + (negative ? static_cast<unsigned char>(~byte) : byte);
    }
    f = negative ? -(f + 1) : f;
    if (!std::isfinite(f)) f = negative ? -HUGE_VAL : HUGE_VAL;
    push(make(pnode::kind::integer, std::bit_cast<std::uint64_t>(f), 0, true));
  }
  void push_text(pnode::kind k, std::uint64_t n) {
    if (n > m_limits.max_string)
      fail("a string longer than " + std::to_string(m_limits.max_string) + " bytes (the limit)");
    const std::string_view raw = take(n);
    if (m_doc.nodes.size() >= m_limits.max_nodes)
      fail("more than " + std::to_string(m_limits.max_nodes) + " values (the limit)");
    push(add_text(m_doc, k, raw));
  }
  [[gnu::always_inline]] void memo_put(std::uint64_t key, std::uint32_t id) {
    if (key >= m_limits.max_memo) fail_count("a memo index beyond ", m_limits.max_memo, " (the limit)");
    if (key >= m_memo.size()) m_memo.resize(static_cast<std::size_t>(key) + 1, no_node);
    m_memo[static_cast<std::size_t>(key)] = id;
    if (key == m_memo_next) ++m_memo_next;
  }
  // BINGET / LONG_BINGET and the ones right after it: most of a snapshot's opcodes are memo references
  // (record keys, shared strings, frames), and reading a run of them here, without going back through the
  // opcode switch, spares the switch's indirect jump, which mispredicts at nearly every change of opcode.
  void memo_gets(unsigned char op) {
    while (true) {
      push(memo_get(op == 'h' ? u8() : le(4)));
      if (m_pos >= m_b.size()) return;
      op = static_cast<unsigned char>(m_b[m_pos]);
      if (op != 'h' && op != 'j') return;
      m_op_at = m_pos++;
    }
  }
  // Pushes a new container, and takes the MEMOIZE that CPython writes after every one.
  void push_memoized(std::uint32_t id) {
    push(id);
    if (m_pos < m_b.size() && static_cast<unsigned char>(m_b[m_pos]) == 0x94) {
      m_op_at = m_pos++;
      memo_put(m_memo_next, id);
    }
  }
  [[gnu::always_inline]] std::uint32_t memo_get(std::uint64_t key) const {
    if (key >= m_memo.size() || m_memo[static_cast<std::size_t>(key)] == no_node)
      fail_count("a memo reference to ", key, ", never stored");
    return m_memo[static_cast<std::size_t>(key)];
  }

  std::string_view m_b;
  const std::string& m_origin;
  pickle_limits m_limits;
  std::size_t m_pos = 0, m_op_at = 0;
  pdoc m_doc;
  std::vector<std::uint32_t> m_stack;
  std::vector<std::size_t> m_marks;
  std::vector<std::uint32_t> m_memo;
  std::uint64_t m_memo_next = 0;
  std::uint32_t m_none = no_node, m_true = no_node, m_false = no_node;
  std::array<std::uint32_t, 256> m_small{};  // BININT1 values
  static constexpr int int_cache_bits = 13;
  std::vector<std::pair<std::int64_t, std::uint32_t>> m_ints =
      std::vector<std::pair<std::int64_t, std::uint32_t>>(std::size_t{1} << int_cache_bits, {0, no_node});
};

std::uint32_t from_json(pdoc& d, const nlohmann::json& j, int depth) {
  if (depth > 1000) throw bad_input("snapshot", "JSON nested deeper than 1000 levels");
  switch (j.type()) {
    case nlohmann::json::value_t::null:
      return add_node(d, pnode::kind::none);
    case nlohmann::json::value_t::boolean:
      return add_node(d, pnode::kind::boolean, j.get<bool>());
    case nlohmann::json::value_t::number_integer:
      return add_node(d, pnode::kind::integer, static_cast<std::uint64_t>(j.get<std::int64_t>()));
    case nlohmann::json::value_t::number_unsigned: {
      const auto u = j.get<std::uint64_t>();
      if (u > static_cast<std::uint64_t>(INT64_MAX))
        return add_node(d, pnode::kind::integer, std::bit_cast<std::uint64_t>(static_cast<double>(u)), 0,
                        true);
      return add_node(d, pnode::kind::integer, u);
    }
    case nlohmann::json::value_t::number_float:
      return add_node(d, pnode::kind::floating, std::bit_cast<std::uint64_t>(j.get<double>()));
    case nlohmann::json::value_t::string:
      return add_text(d, pnode::kind::string, j.get_ref<const std::string&>());
    case nlohmann::json::value_t::array: {
      std::vector<std::uint32_t> kids;
      kids.reserve(j.size());
      for (const auto& x : j) kids.push_back(from_json(d, x, depth + 1));
      const auto id = add_node(d, pnode::kind::list);
      if (!add_items(d, id, kids.data(), kids.size())) throw bad_input("snapshot", "too many JSON values");
      return id;
    }
    case nlohmann::json::value_t::object: {
      std::vector<std::uint32_t> kids;
      kids.reserve(2 * j.size());
      for (const auto& [k, v] : j.items()) {
        kids.push_back(add_text(d, pnode::kind::string, k));
        kids.push_back(from_json(d, v, depth + 1));
      }
      const auto id = add_node(d, pnode::kind::dict);
      if (!add_items(d, id, kids.data(), kids.size())) throw bad_input("snapshot", "too many JSON values");
      return id;
    }
    default:
      return add_node(d, pnode::kind::bytes);
  }
}

}  // namespace

pdoc read_pickle(std::string_view bytes, const std::string& origin, const pickle_limits& limits) {
  return reader(bytes, origin, limits).run();
}

pdoc pdoc_from_json(const nlohmann::json& j) {
  pdoc d;
  d.root = from_json(d, j, 0);
  return d;
}

}  // namespace headroom::probes
