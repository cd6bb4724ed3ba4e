// launcher_target.cpp: the launcher fuzz target. The input is lines "NAME=VALUE" forming the environment
// probes::detect_launch reads (the variables of mpirun, srun and PMI, and any others), and optionally one
// line "@world=RANK,SIZE": the world a transport reached, handed to check_world. Invariants: detect_launch
// returns nullopt exactly when no launcher's rank or size is set (srun's only inside a job step), else a
// launch whose rank and local rank lie in its world, read from the first scheme with a variable set, or
// throws bad_input; check_world throws bad_input exactly when the world differs from the launch's.
#include <charconv>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "fuzz_internal.hpp"
#include "planner/errors.hpp"
#include "probes/ranks/launch.hpp"

namespace headroom::fuzz {
namespace {

struct scheme_vars {
  const char *rank, *size, *requires_var;
};

// The schemes in detect_launch's order (probes/ranks/launch.cpp).
constexpr scheme_vars schemes[] = {
    {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", nullptr},
    {"SLURM_PROCID", "SLURM_STEP_NUM_TASKS", "SLURM_STEP_ID"},
    {"PMI_RANK", "PMI_SIZE", nullptr},
};

// Returns the rank variable of the scheme that decides in `env`, or nullptr when none has a variable set.
const char* deciding_scheme(const std::map<std::string, std::string>& env) {
  for (const auto& s : schemes) {
    if (s.requires_var && !env.count(s.requires_var)) continue;
    if (env.count(s.rank) || env.count(s.size)) return s.rank;
  }
  return nullptr;
}

// Returns `text` as an int, nullopt unless it is one whole.
std::optional<int> to_int(std::string_view text) {
  int v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return v;
}

// Checks that check_world throws bad_input exactly when (rank, size) is not `li`'s world.
void check_world_agrees(const probes::launch_info& li, int rank, int size) {
  bool threw = false;
  try {
    probes::check_world(li, rank, size);
  } catch (const bad_input&) {
    threw = true;
  }
  require(threw == (rank != li.rank || size != li.size));
}

}  // namespace

void fuzz_launcher(std::string_view bytes) {
  std::map<std::string, std::string> env;
  std::optional<std::pair<int, int>> world;
  while (!bytes.empty()) {
    const auto eol = bytes.find('\n');
    const std::string_view line = bytes.substr(0, eol);
    bytes = eol == std::string_view::npos ? std::string_view() : bytes.substr(eol + 1);
    const auto eq = line.find('=');
    if (eq == std::string_view::npos) continue;
    const std::string_view name = line.substr(0, eq), value = line.substr(eq + 1);
    if (name == "@world") {
      const auto comma = value.find(',');
      const auto r = to_int(value.substr(0, comma));
      const auto s = comma == std::string_view::npos ? std::nullopt : to_int(value.substr(comma + 1));
      if (r && s) world = std::make_pair(*r, *s);
    } else {
      // A C environment holds no NUL: the value ends at the first, as getenv would see it.
      env[std::string(name)] = std::string(value.substr(0, value.find('\0')));
    }
  }
  const auto getter = [&env](const char* name) -> const char* {
    const auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  const char* decider = deciding_scheme(env);
  std::optional<probes::launch_info> li;
  try {
    li = probes::detect_launch(getter);
  } catch (const bad_input&) {
    require(decider != nullptr);
    return;
  }
  require(li.has_value() == (decider != nullptr));
  const probes::launch_info launch = li.value_or(probes::launch_info{});
  if (li) {
    require(li->size >= 1 && li->rank >= 0 && li->rank < li->size);
    require(li->local_rank >= 0 && li->local_rank < li->size);
    require(li->rank_variable == decider && !li->launcher.empty());
    require(to_int(env.at(li->rank_variable)) == li->rank && to_int(env.at(li->size_variable)) == li->size);
  }
  check_world_agrees(launch, launch.rank, launch.size);
  if (world) check_world_agrees(launch, world->first, world->second);
  // A transport's world one rank larger, or this rank's neighbour, is a mismatch.
  if (launch.size < 1 << 30) check_world_agrees(launch, launch.rank, launch.size + 1);
  check_world_agrees(launch, launch.rank == 0 ? 1 : 0, launch.size);
}

}  // namespace headroom::fuzz
