// mpi_transport.cpp: the rank transport over MPI (built when MPI is found). MPI only bootstraps: it carries
// NCCL unique ids and the ranks' records, never tensors. Every exchange is non-blocking and polled against a
// deadline, so a dead or hung rank ends the run with a timeout instead of hanging it.
#include <mpi.h>

#include <chrono>
#include <thread>

#include "probes/ranks/rank_transport.hpp"

namespace headroom::probes {

namespace {

using clock_type = std::chrono::steady_clock;
constexpr int record_tag = 4242;

// Polls `req` until it completes or the deadline passes; returns whether it completed.
bool wait_until(MPI_Request& req, clock_type::time_point deadline) {
  for (int done = 0;;) {
    MPI_Test(&req, &done, MPI_STATUS_IGNORE);
    if (done) return true;
    if (clock_type::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

class mpi_transport final : public rank_transport {
 public:
  explicit mpi_transport(const launch_info&) {
    int initialised = 0;
    MPI_Initialized(&initialised);
    if (!initialised) {
      int provided = 0;
      MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SINGLE, &provided);
      m_owns = true;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &m_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &m_size);
  }
  ~mpi_transport() override {
    if (m_owns) MPI_Finalize();
  }
  int rank() const override { return m_rank; }
  int size() const override { return m_size; }

  std::vector<std::string> all_gather(const std::string& mine, std::chrono::milliseconds timeout) override {
    const auto deadline = clock_type::now() + timeout;
    const int n = static_cast<int>(mine.size());
    std::string all(static_cast<std::size_t>(n) * static_cast<std::size_t>(m_size), '\0');
    MPI_Request req;
    MPI_Iallgather(mine.data(), n, MPI_BYTE, all.data(), n, MPI_BYTE, MPI_COMM_WORLD, &req);
    if (!wait_until(req, deadline))
      throw rank_timeout(
          "not every rank reached the all-gather within " + std::to_string(timeout.count() / 1000) + " s",
          {});
    std::vector<std::string> out;
    for (int r = 0; r < m_size; ++r)
      out.push_back(
          all.substr(static_cast<std::size_t>(r) * static_cast<std::size_t>(n), static_cast<std::size_t>(n)));
    return out;
  }

  std::vector<std::optional<std::string>> gather(const std::string& mine,
                                                 std::chrono::milliseconds timeout) override {
    const auto deadline = clock_type::now() + timeout;
    if (m_rank != 0) {
      MPI_Request req;
      MPI_Isend(mine.data(), static_cast<int>(mine.size()), MPI_BYTE, 0, record_tag, MPI_COMM_WORLD, &req);
      if (!wait_until(req, deadline)) {
        MPI_Cancel(&req);
        throw rank_timeout("rank 0 did not take this rank's record", {0});
      }
      return {};
    }
    std::vector<std::optional<std::string>> out(static_cast<std::size_t>(m_size));
    out[0] = mine;
    int pending = m_size - 1;
    while (pending > 0 && clock_type::now() <= deadline) {
      bool progress = false;
      for (int r = 1; r < m_size; ++r) {
        if (out[static_cast<std::size_t>(r)]) continue;
        int flag = 0;
        MPI_Status st;
        MPI_Iprobe(r, record_tag, MPI_COMM_WORLD, &flag, &st);
        if (!flag) continue;
        int count = 0;
        MPI_Get_count(&st, MPI_BYTE, &count);
        std::string msg(static_cast<std::size_t>(count), '\0');
        MPI_Recv(msg.data(), count, MPI_BYTE, r, record_tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        out[static_cast<std::size_t>(r)] = std::move(msg);
        --pending;
        progress = true;
      }
      if (!progress) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return out;
  }

 private:
  int m_rank = 0, m_size = 1;
  bool m_owns = false;
};

}  // namespace

std::unique_ptr<rank_transport> open_mpi_transport(const launch_info& li, std::string&) {
  return std::make_unique<mpi_transport>(li);
}

}  // namespace headroom::probes
