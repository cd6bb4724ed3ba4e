// frames.hpp: naming the stack frames a snapshot recorded (internal to probes/snapshots/).
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "probes/snapshots/snapshot.hpp"

namespace headroom::probes {

// Names frames once: snapshot frame dicts are shared through the memo, so a trace of 20,000 events has a
// few thousand distinct frames behind a million references.
class frame_namer {
 public:
  explicit frame_namer(const pdoc& d) : m_doc(d), m_kind(d.nodes.size(), unknown) {}
  // Returns "name (file.py:line)" of the first frame in user code, else the first Python frame, else ""
  // (a reference valid while the namer lives). Each frame is classified once; a frames list is walked up
  // to its first user frame at each call, and a long one (over long_list frames) once only: a list the
  // memo shares between every event (a hostile pickle's million-frame list behind a million allocations)
  // costs its length once, not per event, while the short lists of a real trace, one per event, are not
  // worth a cache entry each.
  const std::string& top(std::uint32_t frames) {
    if (frames == UINT32_MAX) return m_empty;
    const auto kids = m_doc.at(frames).kids;
    const bool cached = kids.size() > long_list;
    if (cached)
      if (auto it = m_top.find(frames); it != m_top.end()) return *it->second;
    const std::string* first_py = nullptr;
    const std::string* found = nullptr;
    for (std::uint32_t f : kids) {
      if (m_kind[f] == unknown) classify(f);
      if (m_kind[f] == user) {
        found = &m_text[f];
        break;
      }
      if (m_kind[f] == torch_py && !first_py) first_py = &m_text[f];
    }
    if (!found) found = first_py ? first_py : &m_empty;
    if (cached) m_top[frames] = found;
    return *found;
  }

  // Asks the processor to fetch what top(frames) will read, in two steps a few events apart (the list's
  // node, then its items, found through the node): a trace's frames lists lie far apart in the document, and
  // naming each alloc otherwise waits on two cache misses. Hints only; returns nothing.
  void prefetch_node(std::uint32_t frames) const {
    if (frames < m_doc.nodes.size()) __builtin_prefetch(&m_doc.nodes[frames]);
  }
  void prefetch_items(std::uint32_t frames) const {
    if (frames < m_doc.nodes.size())
      __builtin_prefetch(m_doc.items.data() + static_cast<std::uint32_t>(m_doc.nodes[frames].v));
  }

 private:
  enum : std::uint8_t { unknown, other, torch_py, user };
  void classify(std::uint32_t f) {
    m_kind[f] = other;
    if (m_doc.at(f).k != pnode::kind::dict) return;
    auto file = m_doc.get(f, "filename");
    auto name = m_doc.get(f, "name");
    if (!file || !name) return;
    auto fs = m_doc.string(*file);
    auto ns = m_doc.string(*name);
    if (!fs || !ns || fs->size() < 3 || fs->substr(fs->size() - 3) != ".py") return;
    const auto line_node = m_doc.get(f, "line");
    const auto line = line_node ? m_doc.integer(*line_node).value_or(0) : 0;
    const auto slash = fs->rfind('/');
    m_text[f] = std::string(*ns) + " (" +
                std::string(slash == std::string_view::npos ? *fs : fs->substr(slash + 1)) + ":" +
                std::to_string(line) + ")";
    m_kind[f] = fs->find("/torch/") != std::string_view::npos ? torch_py : user;
  }
  const pdoc& m_doc;
  std::vector<std::uint8_t> m_kind;
  std::unordered_map<std::uint32_t, std::string> m_text;
  std::unordered_map<std::uint32_t, const std::string*> m_top;  // long frames list -> its top()
  static constexpr std::size_t long_list = 64;
  const std::string m_empty;
};

}  // namespace headroom::probes
