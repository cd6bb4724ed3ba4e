// frames.cpp: top_user_frame (snapshot.hpp) through frame_namer (frames.hpp).
#include "probes/snapshots/frames.hpp"

namespace headroom::probes {

std::string top_user_frame(const pdoc& doc, std::uint32_t frames) {
  return frame_namer(doc).top(frames);
}

}  // namespace headroom::probes
