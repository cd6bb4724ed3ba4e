// file_bytes.hpp: a snapshot file's bytes, mapped from the page cache where it can be (internal to
// probes/snapshots/). A million-event capture is an 80 MB file; reading it copies it into 80 MB of fresh
// memory, which on a virtual machine costs more to fault in than the parsing of it. Mapped, the bytes are
// the page cache's own pages. Files under 8 MiB are read as before (the copy costs nothing there). A mapped
// file cut short by another process while it is read ends this one with SIGBUS instead of a "truncated"
// refusal: the one case a mapping handles worse than a read, accepted for the large files only.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace headroom::probes {

class file_bytes {
 public:
  // Maps the regular file at `path` (read-only) when it is one of 8 MiB to `cap` bytes; otherwise reads it
  // with read_regular_file (planner/model_files.hpp), which refuses it with its usual message (not a
  // regular file, over `cap`, cannot be read; `what` names the input there).
  file_bytes(const std::string& path, std::uintmax_t cap, const char* what);
  ~file_bytes();
  file_bytes(const file_bytes&) = delete;
  file_bytes& operator=(const file_bytes&) = delete;

  // Returns the bytes (valid until release() or destruction).
  std::string_view view() const { return m_view; }
  // Gives the bytes back (unmaps or frees them); returns nothing.
  void release();

 private:
  void* m_map = nullptr;
  std::size_t m_mapped = 0;
  std::string m_read;  // the fallback's copy
  std::string_view m_view;
};

}  // namespace headroom::probes
