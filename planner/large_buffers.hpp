// large_buffers.hpp: room for the large arrays a long capture fills (a snapshot file's bytes, the parsed
// pickle, the event lists), reserved so the kernel may back it with 2 MiB pages. A million-event snapshot
// touches about 400 MB; in 4 KiB pages that is 100,000 page faults, which cost more than the parsing on a
// virtual machine (measured on the CI machine: 200 MB touched in 0.57 s of faults, 0.02 s with 2 MiB pages).
// Advice only: where transparent huge pages are off ("never" in
// /sys/kernel/mm/transparent_hugepage/enabled) nothing changes but the speed.
#pragma once

#include <cstddef>
#include <cstdint>

namespace headroom {

// Asks the kernel (madvise MADV_HUGEPAGE) to back the whole 2 MiB pages inside [p, p + bytes) with huge
// pages. Regions under 4 MiB are left alone (most of their pages would be partial). Must be called before
// the memory is first written to have an effect. Never fails: an advice refused is ignored.
void advise_huge_pages(void* p, std::size_t bytes);

// Reserves room for `n` elements in `v` (a std::vector or std::string) and advises huge pages for it when
// it is large; returns nothing. The room is address space until written: what is never filled is never
// resident.
template <class Container>
void reserve_large(Container& v, std::size_t n) {
  if (n <= v.capacity()) return;
  v.reserve(n);
  advise_huge_pages(v.data() + v.size(), (v.capacity() - v.size()) * sizeof(*v.data()));
}

}  // namespace headroom
