// fuzz_internal.hpp: what the fuzz targets' bodies share (fuzz_targets.cpp dispatches; the targets over
// the launcher's variables, printable strings, output files and launch importers live in files of their own).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

namespace headroom::fuzz {

// Aborts (a finding) when `ok` is false.
inline void require(bool ok) {
  if (!ok) std::abort();
}

// Reads the fuzz input front to back: a byte at a time, then what is left. Past the end every byte is 0.
class byte_reader {
 public:
  explicit byte_reader(std::string_view bytes) : m_bytes(bytes) {}
  // Returns the next byte, or 0 when none is left.
  std::uint8_t next() { return m_pos < m_bytes.size() ? static_cast<std::uint8_t>(m_bytes[m_pos++]) : 0; }
  // Returns whether any byte is left.
  bool more() const { return m_pos < m_bytes.size(); }
  // Returns what is left, and consumes it.
  std::string_view rest() {
    const std::string_view r = m_bytes.substr(m_pos);
    m_pos = m_bytes.size();
    return r;
  }

 private:
  std::string_view m_bytes;
  std::size_t m_pos = 0;
};

// The launcher target: an environment of launcher variables read by probes::detect_launch and check_world.
void fuzz_launcher(std::string_view bytes);
// The printable target: headroom::printable on arbitrary bytes.
void fuzz_printable(std::string_view bytes);
// The outputs target: probes::output_set over spellings of files in a scratch directory.
void fuzz_outputs(std::string_view bytes);
// The launch importers' targets (imports_target.cpp): a Megatron-LM launch text or YAML, a DeepSpeed JSON
// config, a torchtitan TOML job file with overrides.
void fuzz_megatron_args(std::string_view bytes);
void fuzz_deepspeed_config(std::string_view bytes);
void fuzz_torchtitan_config(std::string_view bytes);
// The run readers' targets (readers_target.cpp): observe's rows (CSV or JSON) and a capture's sidecar.
void fuzz_observations(std::string_view bytes);
void fuzz_sidecar(std::string_view bytes);

}  // namespace headroom::fuzz
