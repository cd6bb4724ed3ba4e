// make_snapshot.cpp: writes the generated snapshot of bench/synthetic_snapshot.hpp to a file, so the
// command line can be timed on it: `headroom_make_snapshot 1000000 big.pickle`, then
// `/usr/bin/time -v headroom probe snapshot big.pickle` (the README's "Speed" section).
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>

#include "bench/synthetic_snapshot.hpp"

int main(int argc, char** argv) {
  if (argc < 3 || argc > 4) {
    std::cerr << "usage: headroom_make_snapshot EVENTS FILE [FRAMES_PER_EVENT]\n";
    return 2;
  }
  const long long events = std::atoll(argv[1]);
  const long long frames = argc == 4 ? std::atoll(argv[3]) : 8;
  if (events < 1 || events > 100'000'000 || frames < 1 || frames > 1000) {
    std::cerr << "headroom_make_snapshot: EVENTS must be 1-100000000 and FRAMES_PER_EVENT 1-1000\n";
    return 2;
  }
  const std::string bytes =
      headroom::bench::synthetic_snapshot(static_cast<std::size_t>(events), static_cast<std::size_t>(frames));
  std::ofstream out(argv[2], std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) {
    std::cerr << "headroom_make_snapshot: cannot write " << argv[2] << "\n";
    return 1;
  }
  std::cout << argv[2] << ": " << bytes.size() << " bytes\n";
  return 0;
}
