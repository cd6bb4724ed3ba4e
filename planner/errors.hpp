// errors.hpp: the one exception type for input the planner cannot accept.
// The CLI turns it into one line on stderr and the "bad input" exit status.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace headroom {

// Thrown for any input the model cannot represent: a missing or malformed field, a layout that does not
// divide, a size that would overflow 64-bit byte counts. what() is "<field>: <problem>".
class bad_input : public std::runtime_error {
 public:
  bad_input(std::string field, std::string problem)
      : std::runtime_error(field + ": " + problem), m_field(std::move(field)), m_problem(std::move(problem)) {}
  const std::string& field() const noexcept { return m_field; }
  // Returns what is wrong, without the field: what a caller that renames the field passes on (what() stops
  // at a NUL the input held; this does not).
  const std::string& problem() const noexcept { return m_problem; }

 private:
  std::string m_field, m_problem;
};

namespace detail {
// Returns a * b, or throws bad_input naming `what` when the product leaves int64.
inline std::int64_t checked_mul(std::int64_t a, std::int64_t b, const char* what) {
  std::int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) throw bad_input(what, "overflows 64-bit byte counts");
  return r;
}
// Returns a + b, or throws bad_input naming `what` when the sum leaves int64.
inline std::int64_t checked_add(std::int64_t a, std::int64_t b, const char* what) {
  std::int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) throw bad_input(what, "overflows 64-bit byte counts");
  return r;
}
}  // namespace detail

}  // namespace headroom
