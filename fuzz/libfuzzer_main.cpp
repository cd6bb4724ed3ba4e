// libfuzzer_main.cpp: libFuzzer's entry for one target, chosen when the binary is built
// (HEADROOM_FUZZ_TARGET, a name from fuzz_target_names()).
#include <cstddef>
#include <cstdint>

#include "fuzz_targets.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return headroom::fuzz::fuzz_one(HEADROOM_FUZZ_TARGET, data, size);
}
