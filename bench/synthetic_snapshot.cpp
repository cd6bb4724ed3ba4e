// synthetic_snapshot.cpp: the generated snapshot (synthetic_snapshot.hpp). The pickle opcodes and the
// choices of encoding (BININT1 / BININT2 / BININT / LONG1 for integers, MEMOIZE after each string, dict and
// list, SETITEMS and APPENDS in batches of 1000, FRAME every 64 KiB) follow CPython's Lib/pickle.py
// (_Pickler.save_long, save_dict, _batch_appends, _Framer); the record fields follow
// torch/cuda/memory.py's _snapshot() as the shared captures (docs/snapshots.md) hold them.
#include "bench/synthetic_snapshot.hpp"

#include <cstdint>
#include <cstring>
#include <map>
#include <unordered_map>
#include <vector>

#include "probes/allocators/caching_allocator.hpp"
#include "probes/devices/sim_device.hpp"

namespace headroom::bench {

namespace {

using probes::caching_allocator;

// Writes pickle opcodes, memoizing as CPython's pickler does.
class pickle_writer {
 public:
  pickle_writer() { m_out = "\x80\x04"; }
  void op(char c) { m_cur.push_back(c); }
  void memoize() {
    op('\x94');
    ++m_memo;
  }
  void get(std::uint32_t idx) {
    if (idx < 256) {
      op('h');
      op(static_cast<char>(idx));
    } else {
      op('j');
      le(idx, 4);
    }
  }
  void integer(std::int64_t v) {
    if (v >= 0 && v < 256) {
      op('K');
      op(static_cast<char>(v));
    } else if (v >= 0 && v < 65536) {
      op('M');
      le(static_cast<std::uint64_t>(v), 2);
    } else if (v >= INT32_MIN && v <= INT32_MAX) {
      op('J');
      le(static_cast<std::uint64_t>(v), 4);
    } else {  // LONG1: the fewest little-endian two's-complement bytes
      int n = 1;
      while (n < 8 && !(v >> (8 * n - 1) == 0 || v >> (8 * n - 1) == -1)) ++n;
      op('\x8a');
      op(static_cast<char>(n));
      le(static_cast<std::uint64_t>(v), n);
    }
  }
  void boolean(bool b) { op(b ? '\x88' : '\x89'); }
  void floating(double d) {
    std::uint64_t bits;
    static_assert(sizeof bits == sizeof d);
    std::memcpy(&bits, &d, sizeof d);
    op('G');
    for (int k = 7; k >= 0; --k) op(static_cast<char>(bits >> (8 * k)));
  }
  void string(const std::string& s) {
    if (auto it = m_strings.find(s); it != m_strings.end()) return get(it->second);
    op('\x8c');  // SHORT_BINUNICODE: every string here is under 256 bytes
    op(static_cast<char>(s.size()));
    m_cur += s;
    m_strings[s] = m_memo;
    memoize();
  }
  std::uint32_t memo() const { return m_memo; }
  // A container's items between MARK and SETITEMS / APPENDS, 1000 at a time; `n` items, `item(i)` writes one.
  template <class F>
  void batches(std::size_t n, char one, char many, F item) {
    for (std::size_t at = 0; at < n; at += 1000) {
      const std::size_t end = std::min(n, at + 1000);
      if (end - at == 1) {
        item(at);
        op(one);
        continue;
      }
      op('(');
      for (std::size_t i = at; i < end; ++i) item(i);
      op(many);
      flush_if_full();
    }
  }
  void flush_if_full() {
    if (m_cur.size() < 65536) return;
    m_out.push_back('\x95');
    const auto n = m_cur.size();
    for (int k = 0; k < 8; ++k) m_out.push_back(static_cast<char>(static_cast<std::uint64_t>(n) >> (8 * k)));
    m_out += m_cur;
    m_cur.clear();
  }
  std::string finish() {
    op('.');
    flush_if_full();
    if (!m_cur.empty()) {
      m_out.push_back('\x95');
      const auto n = m_cur.size();
      for (int k = 0; k < 8; ++k)
        m_out.push_back(static_cast<char>(static_cast<std::uint64_t>(n) >> (8 * k)));
      m_out += m_cur;
    }
    return std::move(m_out);
  }

 private:
  void le(std::uint64_t v, int n) {
    for (int k = 0; k < n; ++k) op(static_cast<char>(v >> (8 * k)));
  }
  std::string m_out, m_cur;
  std::uint32_t m_memo = 0;
  std::unordered_map<std::string, std::uint32_t> m_strings;
};

// A frame of the shared pool: {'name', 'filename', 'line'} as _snapshot() writes one.
struct frame {
  std::string name, filename;
  std::int64_t line = 0;
};

// A sim_device that notes each segment it maps, for the segment_alloc events.
class noting_device final : public probes::device {
 public:
  noting_device() : m_sim(std::int64_t{1} << 42, 2 * mib) {}
  std::optional<std::uint64_t> map(std::int64_t bytes) override {
    auto a = m_sim.map(bytes);
    if (a) mapped.push_back({*a, bytes});
    return a;
  }
  void unmap(std::uint64_t address, std::int64_t bytes) override { m_sim.unmap(address, bytes); }
  std::optional<std::uint64_t> reserve_range(std::int64_t bytes) override {
    return m_sim.reserve_range(bytes);
  }
  bool map_at(std::uint64_t b, std::int64_t o, std::int64_t n, std::int64_t p) override {
    return m_sim.map_at(b, o, n, p);
  }
  void unmap_at(std::uint64_t b, std::int64_t o, std::int64_t n, std::int64_t p) override {
    m_sim.unmap_at(b, o, n, p);
  }
  void release_range(std::uint64_t b, std::int64_t n) override { m_sim.release_range(b, n); }
  std::int64_t capacity() const override { return m_sim.capacity(); }
  std::int64_t used() const override { return m_sim.used(); }
  std::int64_t granularity() const override { return m_sim.granularity(); }
  probes::memory_info memory() const override { return m_sim.memory(); }
  std::string describe() const override { return "noting " + m_sim.describe(); }
  std::vector<std::pair<std::uint64_t, std::int64_t>> mapped;

 private:
  probes::sim_device m_sim;
};

struct event {
  const char* action;
  std::uint64_t addr;
  std::int64_t size;
  std::uint32_t site;  // the call site whose frames it carries
  bool is_free;
};

// The generator's state: the allocator it runs, the events it recorded, the live blocks.
class generator {
 public:
  explicit generator(std::size_t frames_per_event) : m_alloc(m_dev, {}), m_frames(frames_per_event) {
    make_frames();
  }
  std::int64_t alloc(std::int64_t bytes, std::uint32_t site) {
    const std::size_t before = m_dev.mapped.size();
    const auto h = *m_alloc.allocate(bytes);
    for (std::size_t k = before; k < m_dev.mapped.size(); ++k)
      events.push_back({"segment_alloc", m_dev.mapped[k].first, m_dev.mapped[k].second, site, false});
    const auto addr = m_alloc.address_of(h);
    events.push_back({"alloc", addr, bytes, site, false});
    m_requested[addr] = {bytes, site};
    return h;
  }
  void free(std::int64_t h, std::uint32_t site) {
    const auto addr = m_alloc.address_of(h);
    const auto bytes = m_requested[addr].first;
    m_requested.erase(addr);
    m_alloc.release(h);
    events.push_back({"free_requested", addr, bytes, site, true});
    events.push_back({"free_completed", addr, bytes, site, true});
  }
  std::string write();

  std::vector<event> events;

 private:
  void make_frames();
  void write_frames(pickle_writer& w, std::uint32_t site, bool is_free);
  void write_segments(pickle_writer& w);

  noting_device m_dev;
  caching_allocator m_alloc;
  std::size_t m_frames;
  std::map<std::uint64_t, std::pair<std::int64_t, std::uint32_t>> m_requested;  // live: bytes, site
  std::vector<frame> m_pool;
  std::vector<std::vector<std::uint32_t>> m_sites;  // per call site, its stack (indices into m_pool)
  std::vector<std::int64_t> m_frame_memo;           // per pool frame, its memo index once written
};

void generator::make_frames() {
  // A C++ prefix every allocation shares (as in the shared captures: unwind, gather, malloc...), one C++
  // operator frame per site, then the user's Python frames and torch's module frames.
  const char* prefix[] = {
      "torch::unwind::unwind()", "torch::CapturedTraceback::gather(bool, bool, bool)",
      ("c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc(signed char, "
       "unsigned long, CUstream_st*)"),
      "at::detail::empty_cuda(c10::ArrayRef<long>, c10::TensorOptions const&)"};
  for (const char* p : prefix) m_pool.push_back({p, "??", 0});
  const std::uint32_t ops = 96, user_lines = 160;
  for (std::uint32_t k = 0; k < ops; ++k)
    m_pool.push_back({"at::_ops::op_" + std::to_string(k) + "::call(at::Tensor const&)", "??", 0});
  for (std::uint32_t k = 0; k < user_lines; ++k)
    m_pool.push_back({"forward", "/home/user/project/model.py", 40 + 3 * k});
  const std::uint32_t torch_first = static_cast<std::uint32_t>(m_pool.size());
  m_pool.push_back({"_call_impl", "/usr/lib/python3/site-packages/torch/nn/modules/module.py", 1750});
  m_pool.push_back({"_wrapped_call_impl", "/usr/lib/python3/site-packages/torch/nn/modules/module.py", 1739});
  m_pool.push_back({"train_step", "/home/user/project/train.py", 88});
  m_pool.push_back({"<module>", "/home/user/project/train.py", 120});
  m_frame_memo.assign(m_pool.size(), -1);
  for (std::uint32_t s = 0; s < 480; ++s) {
    std::vector<std::uint32_t> st;
    for (std::uint32_t p = 0; p < 4; ++p) st.push_back(p);
    st.push_back(4 + s % ops);
    st.push_back(4 + ops + s % user_lines);
    for (std::uint32_t p = 0; p < 4; ++p) st.push_back(torch_first + p);
    for (std::uint32_t p = 0; st.size() < 2 * m_frames; ++p) st.push_back(4 + (s * 7 + p) % ops);
    m_sites.push_back(std::move(st));
  }
}

void generator::write_frames(pickle_writer& w, std::uint32_t site, bool is_free) {
  const auto& st = m_sites[site % m_sites.size()];
  // Allocations carry about 1.4 x the mean, frees about 0.8 x, as in the shared captures (54 and 29).
  const std::size_t n =
      std::min(st.size(), std::max<std::size_t>(1, is_free ? m_frames * 4 / 5 : m_frames * 7 / 5));
  w.op(']');
  w.memoize();
  w.batches(n, 'a', 'e', [&](std::size_t i) {
    const auto f = st[i];
    if (m_frame_memo[f] >= 0) return w.get(static_cast<std::uint32_t>(m_frame_memo[f]));
    w.op('}');
    m_frame_memo[f] = w.memo();
    w.memoize();
    w.op('(');
    w.string("name");
    w.string(m_pool[f].name);
    w.string("filename");
    w.string(m_pool[f].filename);
    w.string("line");
    w.integer(m_pool[f].line);
    w.op('u');
  });
}

void generator::write_segments(pickle_writer& w) {
  const auto segs = m_alloc.snapshot();
  w.op(']');
  w.memoize();
  w.batches(segs.size(), 'a', 'e', [&](std::size_t i) {
    const auto& g = segs[i];
    std::int64_t allocated = 0, requested = 0;
    for (const auto& b : g.blocks)
      if (b.allocated) {
        allocated += b.size;
        requested += m_requested.at(b.address).first;
      }
    w.op('}');
    w.memoize();
    w.op('(');
    w.string("device");
    w.integer(0);
    w.string("address");
    w.integer(static_cast<std::int64_t>(g.address));
    w.string("total_size");
    w.integer(g.size);
    w.string("allocated_size");
    w.integer(allocated);
    w.string("active_size");
    w.integer(allocated);
    w.string("requested_size");
    w.integer(requested);
    w.string("stream");
    w.integer(0);
    w.string("segment_type");
    w.string(g.small ? "small" : "large");
    w.string("segment_pool_id");
    w.integer(0);
    w.integer(0);
    w.op('\x86');
    w.memoize();
    w.string("is_expandable");
    w.boolean(false);
    w.string("frames");
    w.op(']');
    w.memoize();
    w.string("blocks");
    w.op(']');
    w.memoize();
    w.batches(g.blocks.size(), 'a', 'e', [&](std::size_t k) {
      const auto& b = g.blocks[k];
      w.op('}');
      w.memoize();
      w.op('(');
      w.string("address");
      w.integer(static_cast<std::int64_t>(b.address));
      w.string("size");
      w.integer(b.size);
      w.string("requested_size");
      w.integer(b.allocated ? m_requested.at(b.address).first : b.size);
      w.string("state");
      w.string(b.allocated ? "active_allocated" : "inactive");
      w.string("frames");
      if (b.allocated) {
        write_frames(w, m_requested.at(b.address).second, false);
      } else {
        w.op(']');
        w.memoize();
      }
      w.op('u');
    });
    w.op('u');
  });
}

std::string generator::write() {
  pickle_writer w;
  w.op('}');
  w.memoize();
  w.op('(');
  w.string("segments");
  write_segments(w);
  w.string("device_traces");
  w.op(']');
  w.memoize();
  w.op(']');  // device 0's trace
  w.memoize();
  std::int64_t time_us = 1757044802340508;  // a 2025 epoch time in microseconds, as the captures hold
  w.batches(events.size(), 'a', 'e', [&](std::size_t i) {
    const auto& e = events[i];
    w.op('}');
    w.memoize();
    w.op('(');
    w.string("action");
    w.string(e.action);
    w.string("addr");
    w.integer(static_cast<std::int64_t>(e.addr));
    w.string("size");
    w.integer(e.size);
    w.string("stream");
    w.integer(0);
    w.string("time_us");
    w.integer(time_us += 37 + static_cast<std::int64_t>(i % 23));
    w.string("frames");
    write_frames(w, e.site, e.is_free);
    w.op('u');
  });
  w.op('a');  // device 0's trace into device_traces
  w.string("allocator_settings");
  w.op('}');
  w.memoize();
  w.op('(');
  w.string("PYTORCH_CUDA_ALLOC_CONF");
  w.string("");
  w.string("max_split_size");
  w.integer(-1);
  w.string("garbage_collection_threshold");
  w.floating(0.0);
  w.string("expandable_segments");
  w.boolean(false);
  w.op('u');
  w.op('u');
  return w.finish();
}

}  // namespace

std::string synthetic_snapshot(std::size_t events, std::size_t frames_per_event) {
  generator g(std::max<std::size_t>(1, frames_per_event));
  std::uint64_t rng = 0x9e3779b97f4a7c15ULL;  // a fixed seed: the same file every time
  auto next = [&rng](std::uint64_t n) {
    rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;  // Knuth's MMIX LCG
    return (rng >> 33) % n;
  };
  // Parameters and optimizer state, alive throughout (sizes of a small transformer's matrices).
  std::vector<std::int64_t> persistent;
  for (std::uint32_t p = 0; p < 64; ++p)
    persistent.push_back(g.alloc((std::int64_t{1} << 20) * static_cast<std::int64_t>(1 + next(48)), p));
  const std::int64_t act_sizes[] = {512,        4096,     65536,    786432,    2 << 20, 6 << 20,
                                    (12 << 20), 24 << 20, 48 << 20, 100 << 20, 3 << 20, 9 << 20};
  const std::uint32_t layers = 24;
  while (g.events.size() + 64 < events) {
    std::vector<std::vector<std::int64_t>> kept(layers);
    for (std::uint32_t l = 0; l < layers && g.events.size() < events; ++l)
      for (std::uint32_t k = 0; k < 8; ++k) {
        const std::uint32_t site = l * 20 + k;
        const auto bytes =
            act_sizes[(l + k * 5) % std::size(act_sizes)] + 512 * static_cast<std::int64_t>(next(8));
        const auto h = g.alloc(bytes, site);
        if (k % 3 == 2)
          g.free(h, site);  // a temporary
        else
          kept[l].push_back(h);
      }
    for (std::uint32_t l = layers; l-- > 0;) {
      for (std::uint32_t k = 0; k < 3; ++k) {
        const std::uint32_t site = l * 20 + 10 + k;
        const auto h = g.alloc(act_sizes[(l * 3 + k) % std::size(act_sizes)], site);
        g.free(h, site);
      }
      for (auto it = kept[l].rbegin(); it != kept[l].rend(); ++it) g.free(*it, l * 20 + 15);
    }
  }
  (void)persistent;
  return g.write();
}

}  // namespace headroom::bench
