// pickle_reader.cpp: the pickle subset reader (see pickle_reader.hpp). Opcode names and encodings follow
// CPython's Lib/pickletools.py, the protocol's reference description.
#include "probes/snapshots/pickle_reader.hpp"

#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>

#include "planner/errors.hpp"

namespace headroom::probes {

std::optional<std::uint32_t> pdoc::get(std::uint32_t id, std::string_view key) const {
  const pnode& d = nodes[id];
  if (d.k != pnode::kind::dict) return std::nullopt;
  // The last occurrence wins, as when Python builds the dict.
  for (std::size_t i = d.kids.size(); i >= 2; i -= 2) {
    const pnode& k = nodes[d.kids[i - 2]];
    if (k.k == pnode::kind::string && k.s == key) return d.kids[i - 1];
  }
  return std::nullopt;
}

std::optional<std::int64_t> pdoc::integer(std::uint32_t id) const {
  const pnode& n = nodes[id];
  if ((n.k == pnode::kind::integer && !n.wide) || n.k == pnode::kind::boolean) return n.i;
  return std::nullopt;
}

std::optional<std::string_view> pdoc::string(std::uint32_t id) const {
  const pnode& n = nodes[id];
  if (n.k != pnode::kind::string) return std::nullopt;
  return std::string_view(n.s);
}

bool looks_like_pickle(std::string_view bytes) {
  return bytes.size() >= 2 && static_cast<unsigned char>(bytes[0]) == 0x80 &&
         static_cast<unsigned char>(bytes[1]) >= 2 && static_cast<unsigned char>(bytes[1]) <= 5;
}

namespace {

class reader {
 public:
  reader(std::string_view b, const std::string& origin, const pickle_limits& l)
      : m_b(b), m_origin(origin), m_limits(l) {}

  pdoc run() {
    m_doc.nodes.reserve(std::min<std::size_t>(m_b.size() / 8 + 16, m_limits.max_nodes));
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
          push(make(pnode::kind::dict));
          break;
        case ']':
          push(make(pnode::kind::list));
          break;
        case ')':
          push(make(pnode::kind::tuple));
          break;
        case 'N':
          push(make(pnode::kind::none));
          break;
        case 0x88:
        case 0x89: {  // NEWTRUE, NEWFALSE
          auto id = make(pnode::kind::boolean);
          m_doc.nodes[id].i = op == 0x88;
          push(id);
          break;
        }
        case 'K':
          push_int(u8());
          break;
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
          double d;
          std::memcpy(&d, &bits, sizeof d);
          auto id = make(pnode::kind::floating);
          m_doc.nodes[id].f = d;
          push(id);
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
          auto id = make(pnode::kind::tuple);
          auto& kids = m_doc.nodes[id].kids;
          kids.assign(m_stack.end() - static_cast<std::ptrdiff_t>(n), m_stack.end());
          m_stack.resize(m_stack.size() - n);
          push(id);
          break;
        }
        case 't': {  // TUPLE from the mark
          auto items = pop_mark();
          auto id = make(pnode::kind::tuple);
          m_doc.nodes[id].kids = std::move(items);
          push(id);
          break;
        }
        case 'l': {  // LIST from the mark
          auto items = pop_mark();
          auto id = make(pnode::kind::list);
          m_doc.nodes[id].kids = std::move(items);
          push(id);
          break;
        }
        case 'd': {  // DICT from the mark
          auto items = pop_mark();
          if (items.size() % 2) fail("DICT with an odd number of items");
          auto id = make(pnode::kind::dict);
          m_doc.nodes[id].kids = std::move(items);
          push(id);
          break;
        }
        case 'a': {  // APPEND
          const auto v = pop();
          append(top(), {v});
          break;
        }
        case 'e': {  // APPENDS
          auto items = pop_mark();
          append(top(), items);
          break;
        }
        case 's': {  // SETITEM
          const auto v = pop();
          const auto k = pop();
          set_items(top(), {k, v});
          break;
        }
        case 'u': {  // SETITEMS
          auto items = pop_mark();
          if (items.size() % 2) fail("SETITEMS with an odd number of items");
          set_items(top(), items);
          break;
        }
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
          push(memo_get(u8()));
          break;
        case 'j':
          push(memo_get(le(4)));
          break;
        case '0':  // POP
          if (!m_marks.empty() && m_marks.back() == m_stack.size())
            m_marks.pop_back();  // POP of a mark, as CPython does
          else
            pop();
          break;
        case '1':  // POP_MARK
          pop_mark();
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
  [[noreturn]] void fail(const std::string& what) const {
    throw bad_input(m_origin,
                    "not a readable snapshot pickle: " + what + " at byte " + std::to_string(m_op_at));
  }
  static std::string hex(unsigned v) {
    const char* d = "0123456789abcdef";
    return {d[(v >> 4) & 15], d[v & 15]};
  }
  std::string_view take(std::uint64_t n) {
    if (n > m_b.size() - m_pos) fail("truncated: " + std::to_string(n) + " bytes wanted past the end");
    auto s = m_b.substr(m_pos, static_cast<std::size_t>(n));
    m_pos += static_cast<std::size_t>(n);
    return s;
  }
  std::uint64_t u8() { return static_cast<unsigned char>(take(1)[0]); }
  std::uint64_t le(int n) {
    const std::string_view raw = take(static_cast<std::uint64_t>(n));
    std::uint64_t v = 0;
    for (int k = n - 1; k >= 0; --k)
      v = v << 8 | static_cast<unsigned char>(raw[static_cast<std::size_t>(k)]);
    return v;
  }
  std::uint32_t make(pnode::kind k) {
    if (m_doc.nodes.size() >= m_limits.max_nodes)
      fail("more than " + std::to_string(m_limits.max_nodes) + " values (the limit)");
    m_doc.nodes.emplace_back();
    m_doc.nodes.back().k = k;
    return static_cast<std::uint32_t>(m_doc.nodes.size() - 1);
  }
  std::size_t floor() const { return m_marks.empty() ? 0 : m_marks.back(); }
  void push(std::uint32_t id) {
    if (m_stack.size() >= m_limits.max_nodes)
      fail("a stack deeper than " + std::to_string(m_limits.max_nodes) + " values (the limit)");
    m_stack.push_back(id);
  }
  std::uint32_t pop() {
    if (m_stack.size() <= floor()) fail("a value popped from an empty stack");
    const auto v = m_stack.back();
    m_stack.pop_back();
    return v;
  }
  std::uint32_t top() const {
    if (m_stack.size() <= floor()) fail("an operation on an empty stack");
    return m_stack.back();
  }
  std::vector<std::uint32_t> pop_mark() {
    if (m_marks.empty()) fail("no mark to pop to");
    const std::size_t at = m_marks.back();
    m_marks.pop_back();
    std::vector<std::uint32_t> items(m_stack.begin() + static_cast<std::ptrdiff_t>(at), m_stack.end());
    m_stack.resize(at);
    return items;
  }
  void push_int(std::int64_t v) {
    auto id = make(pnode::kind::integer);
    m_doc.nodes[id].i = v;
    push(id);
  }
  // LONG1 / LONG4: n bytes, little-endian two's complement. Up to 8 bytes (or 9 with a zero sign byte
  // above a value that still fits) is exact; wider keeps an approximate double and is refused where an
  // integer is needed.
  void push_long(std::uint64_t n) {
    const std::string_view raw = take(n);
    auto id = make(pnode::kind::integer);
    pnode& p = m_doc.nodes[id];
    if (n == 0) {
      push(id);
      return;
    }
    const bool negative = static_cast<unsigned char>(raw[n - 1]) & 0x80;
    if (n <= 8) {
      std::uint64_t v = negative ? ~std::uint64_t{0} : 0;
      for (std::size_t k = 0; k < n; ++k) {
        v &= ~(std::uint64_t{0xff} << (8 * k));
        v |= std::uint64_t{static_cast<unsigned char>(raw[k])} << (8 * k);
      }
      p.i = static_cast<std::int64_t>(v);
    } else {
      p.wide = true;
      double f = 0;
      for (std::size_t k = n; k-- > 0;) {
        const unsigned char byte = static_cast<unsigned char>(raw[k]);
        f = f * 256 + (negative ? static_cast<unsigned char>(~byte) : byte);
      }
      p.f = negative ? -(f + 1) : f;
      if (!std::isfinite(p.f)) p.f = negative ? -HUGE_VAL : HUGE_VAL;
    }
    push(id);
  }
  void push_text(pnode::kind k, std::uint64_t n) {
    if (n > m_limits.max_string)
      fail("a string longer than " + std::to_string(m_limits.max_string) + " bytes (the limit)");
    const std::string_view raw = take(n);
    auto id = make(k);
    m_doc.nodes[id].s.assign(raw.data(), raw.size());
    push(id);
  }
  void append(std::uint32_t to, const std::vector<std::uint32_t>& items) {
    pnode& l = m_doc.nodes[to];
    if (l.k != pnode::kind::list) fail("APPEND to something that is not a list");
    l.kids.insert(l.kids.end(), items.begin(), items.end());
  }
  void set_items(std::uint32_t to, const std::vector<std::uint32_t>& items) {
    pnode& d = m_doc.nodes[to];
    if (d.k != pnode::kind::dict) fail("SETITEM on something that is not a dict");
    d.kids.insert(d.kids.end(), items.begin(), items.end());
  }
  void memo_put(std::uint64_t key, std::uint32_t id) {
    if (key >= m_limits.max_memo)
      fail("a memo index beyond " + std::to_string(m_limits.max_memo) + " (the limit)");
    if (key >= m_memo.size()) m_memo.resize(static_cast<std::size_t>(key) + 1, UINT32_MAX);
    m_memo[static_cast<std::size_t>(key)] = id;
    if (key == m_memo_next) ++m_memo_next;
  }
  std::uint32_t memo_get(std::uint64_t key) const {
    if (key >= m_memo.size() || m_memo[static_cast<std::size_t>(key)] == UINT32_MAX)
      fail("a memo reference to " + std::to_string(key) + ", never stored");
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
};

std::uint32_t from_json(pdoc& d, const nlohmann::json& j, int depth) {
  if (depth > 1000) throw bad_input("snapshot", "JSON nested deeper than 1000 levels");
  d.nodes.emplace_back();
  const auto id = static_cast<std::uint32_t>(d.nodes.size() - 1);
  auto set = [&](pnode::kind k) { d.nodes[id].k = k; };
  switch (j.type()) {
    case nlohmann::json::value_t::null:
      set(pnode::kind::none);
      break;
    case nlohmann::json::value_t::boolean:
      set(pnode::kind::boolean);
      d.nodes[id].i = j.get<bool>();
      break;
    case nlohmann::json::value_t::number_integer:
      set(pnode::kind::integer);
      d.nodes[id].i = j.get<std::int64_t>();
      break;
    case nlohmann::json::value_t::number_unsigned: {
      set(pnode::kind::integer);
      const auto u = j.get<std::uint64_t>();
      if (u > static_cast<std::uint64_t>(INT64_MAX)) {
        d.nodes[id].wide = true;
        d.nodes[id].f = static_cast<double>(u);
      } else {
        d.nodes[id].i = static_cast<std::int64_t>(u);
      }
      break;
    }
    case nlohmann::json::value_t::number_float:
      set(pnode::kind::floating);
      d.nodes[id].f = j.get<double>();
      break;
    case nlohmann::json::value_t::string:
      set(pnode::kind::string);
      d.nodes[id].s = j.get<std::string>();
      break;
    case nlohmann::json::value_t::array: {
      set(pnode::kind::list);
      std::vector<std::uint32_t> kids;
      for (const auto& x : j) kids.push_back(from_json(d, x, depth + 1));
      d.nodes[id].kids = std::move(kids);
      break;
    }
    case nlohmann::json::value_t::object: {
      set(pnode::kind::dict);
      std::vector<std::uint32_t> kids;
      for (const auto& [k, v] : j.items()) {
        d.nodes.emplace_back();
        d.nodes.back().k = pnode::kind::string;
        d.nodes.back().s = k;
        kids.push_back(static_cast<std::uint32_t>(d.nodes.size() - 1));
        kids.push_back(from_json(d, v, depth + 1));
      }
      d.nodes[id].kids = std::move(kids);
      break;
    }
    default:
      set(pnode::kind::bytes);
      break;
  }
  return id;
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
