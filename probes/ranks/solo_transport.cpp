// solo_transport.cpp: the rank transport of a world of one rank (see rank_transport.hpp).
#include "probes/ranks/rank_transport.hpp"

namespace headroom::probes {

namespace {

class solo_transport final : public rank_transport {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::vector<std::string> all_gather(const std::string& mine, std::chrono::milliseconds) override {
    return {mine};
  }
  std::vector<std::optional<std::string>> gather(const std::string& mine,
                                                 std::chrono::milliseconds) override {
    return {mine};
  }
};

}  // namespace

std::unique_ptr<rank_transport> open_solo_transport() {
  return std::make_unique<solo_transport>();
}

}  // namespace headroom::probes
