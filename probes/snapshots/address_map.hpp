// address_map.hpp: a map from block addresses to a value, flat (open addressing, linear probing), for the
// walks over a snapshot's events (internal to probes/snapshots/). A million-event trace inserts and erases
// hundreds of thousands of addresses; a node-based map allocates and frees a node for each, which cost
// more than the walks themselves (docs/snapshots.md, "Speed"). Deletion shifts the following entries back
// (no tombstones), so a long trace never degrades the probes.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace headroom::probes {

template <class V>
class address_map {
 public:
  // Room for about `n` addresses before the first growth.
  explicit address_map(std::size_t n = 0) { rehash(capacity_for(n)); }

  // Returns the value of `key`, or nullptr.
  const V* find(std::uint64_t key) const {
    for (std::size_t i = slot_of(key);; i = (i + 1) & m_mask) {
      if (!m_used[i]) return nullptr;
      if (m_slots[i].first == key) return &m_slots[i].second;
    }
  }
  V* find(std::uint64_t key) { return const_cast<V*>(std::as_const(*this).find(key)); }
  bool contains(std::uint64_t key) const { return find(key) != nullptr; }

  // Sets `key` to `value` (inserting it when absent).
  void set(std::uint64_t key, V value) {
    if (2 * (m_size + 1) > m_slots.size()) rehash(2 * m_slots.size());
    std::size_t i = slot_of(key);
    for (; m_used[i]; i = (i + 1) & m_mask)
      if (m_slots[i].first == key) {
        m_slots[i].second = std::move(value);
        return;
      }
    m_used[i] = 1;
    m_slots[i] = {key, std::move(value)};
    ++m_size;
  }

  // Removes `key`; returns whether it was there.
  bool erase(std::uint64_t key) {
    std::size_t i = slot_of(key);
    while (true) {
      if (!m_used[i]) return false;
      if (m_slots[i].first == key) break;
      i = (i + 1) & m_mask;
    }
    // Backward shift: move up every later entry of the run whose home slot is not between the hole and it.
    std::size_t hole = i;
    for (std::size_t j = (i + 1) & m_mask; m_used[j]; j = (j + 1) & m_mask) {
      const std::size_t home = slot_of(m_slots[j].first);
      const bool stays = hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);
      if (stays) continue;
      m_slots[hole] = std::move(m_slots[j]);
      hole = j;
    }
    m_used[hole] = 0;
    --m_size;
    return true;
  }

  std::size_t size() const { return m_size; }

  // Calls f(key, value) for every entry, in no particular order.
  template <class F>
  void for_each(F f) const {
    for (std::size_t i = 0; i < m_slots.size(); ++i)
      if (m_used[i]) f(m_slots[i].first, m_slots[i].second);
  }

 private:
  static std::size_t capacity_for(std::size_t n) {
    std::size_t c = 16;
    while (c < 2 * n) c *= 2;
    return c;
  }
  std::size_t slot_of(std::uint64_t key) const {
    // Fibonacci hashing: addresses share their low bits (alignment), the multiply spreads the high ones.
    return static_cast<std::size_t>((key * 0x9e3779b97f4a7c15ull) >> 32) & m_mask;
  }
  void rehash(std::size_t capacity) {
    std::vector<std::pair<std::uint64_t, V>> old = std::move(m_slots);
    std::vector<std::uint8_t> used = std::move(m_used);
    m_slots.assign(capacity, {});
    m_used.assign(capacity, 0);
    m_mask = capacity - 1;
    m_size = 0;
    for (std::size_t i = 0; i < old.size(); ++i)
      if (used[i]) set(old[i].first, std::move(old[i].second));
  }

  std::vector<std::pair<std::uint64_t, V>> m_slots;
  std::vector<std::uint8_t> m_used;
  std::size_t m_mask = 0, m_size = 0;
};

}  // namespace headroom::probes
