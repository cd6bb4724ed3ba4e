// file_bytes.cpp: a snapshot file mapped, or read where it cannot be (file_bytes.hpp).
#include "probes/snapshots/file_bytes.hpp"

#include "planner/model_files.hpp"

#if defined(__linux__)
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#endif

namespace headroom::probes {

namespace {

#if defined(__linux__)
// Returns the mapping of the regular file at `path` of 8 MiB to `cap` bytes, with its length in
// `len`, or nullptr for anything else: the reader then gives the refusal its usual wording. A device is never
// opened (stat first, as read_regular_file does), and the opened descriptor is checked again.
void* map_regular(const std::string& path, std::uintmax_t cap, std::size_t& len) {
  struct stat st {};
  if (path.empty() || ::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return nullptr;
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return nullptr;
  void* p = nullptr;
  constexpr std::uintmax_t smallest_mapped = std::uintmax_t{8} << 20;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
      static_cast<std::uintmax_t>(st.st_size) >= smallest_mapped &&
      static_cast<std::uintmax_t>(st.st_size) <= cap) {
    len = static_cast<std::size_t>(st.st_size);
    // MAP_POPULATE: the pages of the page cache are mapped in one call instead of one fault each.
    p = ::mmap(nullptr, len, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
    if (p == MAP_FAILED) p = nullptr;
    if (p) ::madvise(p, len, MADV_SEQUENTIAL);
  }
  ::close(fd);
  return p;
}
#endif

}  // namespace

file_bytes::file_bytes(const std::string& path, std::uintmax_t cap, const char* what) {
#if defined(__linux__)
  if ((m_map = map_regular(path, cap, m_mapped))) {
    m_view = std::string_view(static_cast<const char*>(m_map), m_mapped);
    return;
  }
#endif
  m_read = read_regular_file(path, cap, what);
  m_view = m_read;
}

file_bytes::~file_bytes() {
  release();
}

void file_bytes::release() {
#if defined(__linux__)
  if (m_map) ::munmap(m_map, m_mapped);
#endif
  m_map = nullptr;
  m_mapped = 0;
  std::string().swap(m_read);
  m_view = {};
}

}  // namespace headroom::probes
