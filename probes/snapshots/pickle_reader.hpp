// pickle_reader.hpp: a reader for the subset of Python's pickle protocol (2-5) that PyTorch memory
// snapshots use: dicts, lists, tuples, strings, bytes, integers of any width, floats, booleans, None, the
// memo and frames. It builds a tree of plain values (stored flat, pdoc) and never executes anything: an
// opcode that would (a global, a reduce, a build, a persistent id...) or one it does not know is refused
// with one line. Every read is bounds-checked, and sizes, nesting and the memo are limited, so a hostile
// file cannot crash it, hang it or make it read past the end.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace headroom::probes {

// One value of a pickle, as pdoc::at() shows it: a view into the document (valid while the document lives
// and is not read into further). Children are node ids, so values the memo shares are stored once and a
// self-referencing list (legal in a pickle) cannot leak or loop.
struct pnode {
  enum class kind : std::uint8_t { none, boolean, integer, floating, string, bytes, list, tuple, dict };
  kind k = kind::none;
  bool wide = false;                    // an integer beyond 64 bits: `f` holds its approximate value
  std::int64_t i = 0;                   // integer, boolean
  double f = 0;                         // floating (and wide integers)
  std::string_view s;                   // string, bytes
  std::span<const std::uint32_t> kids;  // list / tuple items; dict: key, value, key, value...
};

// A parsed pickle, stored flat so a million-event snapshot costs about 16 bytes a value and 4 a child,
// with no allocation per value: nodes of 16 bytes, every string's bytes in one buffer, every container's
// children in one array (a container's children are one run of it; one that grows after others were
// stored moves to the end with room to double, as a vector would).
struct pdoc {
  struct slot {
    pnode::kind k = pnode::kind::none;
    bool wide = false;
    std::uint32_t n = 0;  // string, bytes: length; containers: children
    std::uint64_t v = 0;  // integer / boolean: the value; floating, wide: the double's bits; string,
                          // bytes: offset in `text`; containers: offset in `items` (low 32 bits) and room
                          // (high 32 bits)
  };
  std::vector<slot> nodes;
  std::string text;
  std::vector<std::uint32_t> items;
  std::uint32_t root = 0;

  // Returns node `id` (which must be below nodes.size()).
  pnode at(std::uint32_t id) const;
  // Returns the value of dict `id` under string key `key`, or nullopt (also when `id` is not a dict).
  std::optional<std::uint32_t> get(std::uint32_t id, std::string_view key) const;
  // Returns the integer of `id` (integers and booleans; a wide integer is refused), or nullopt.
  std::optional<std::int64_t> integer(std::uint32_t id) const;
  // Returns the string of `id`, or nullopt when it is not a string.
  std::optional<std::string_view> string(std::uint32_t id) const;
};

// What a pickle may hold. Distinct values only: what the memo shares is stored once (pdoc), and the
// snapshot parser counts what it expands (snapshot_limits, snapshot.hpp).
struct pickle_limits {
  std::size_t max_nodes = std::size_t{1} << 24;  // values (16 bytes each in memory: at most 256 MiB)
  std::size_t max_memo = 1u << 24;
  std::size_t max_depth = 100'000;  // the stack of open marks
  std::size_t max_string = 1u << 30;
};

// Returns the document a pickle holds. Throws bad_input("<origin>", "...") naming the opcode and offset for
// anything outside the subset, a truncated or corrupted stream, or a limit passed.
pdoc read_pickle(std::string_view bytes, const std::string& origin, const pickle_limits& limits = {});

// Returns the document a JSON value holds (the same content as a snapshot's pickle, written as JSON).
pdoc pdoc_from_json(const nlohmann::json& j);

// Returns whether `bytes` starts like a pickle (PROTO 2-5).
bool looks_like_pickle(std::string_view bytes);

}  // namespace headroom::probes
