// output_signals_test.cpp: the built `headroom`, signalled (SIGTERM, SIGINT, SIGHUP) while it writes its
// output files, leaves no temporary and each target old or whole; two processes writing one target leave the
// whole file of one of them; a command whose output file cannot be written prints nothing on stdout
// (probes/io/results_file.hpp, docs/exit-statuses.md). The pause between the complete temporaries and the
// renames is results_file.cpp's test-only HEADROOM_TEST_PAUSE_BEFORE_COMMIT_MS.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cli_support.hpp"

extern char** environ;

namespace {

namespace fs = std::filesystem;
using clock_type = std::chrono::steady_clock;

constexpr int cleanup_signals[] = {SIGTERM, SIGINT, SIGHUP};

// A plan search whose outputs take some time to write (--json about 4 MB, --csv about 0.6 MB at 64 GPUs).
std::string search(int gpus) {
  return "plan --preset llama3-70b --gpus " + std::to_string(gpus) + " --suggest";
}

// A trace of about 50 MB of JSON (a model of 8,000 layers): its write takes long enough to be signalled.
std::string large_trace_model(const std::string& dir) {
  const std::string path = dir + "/deep.json";
  std::ofstream(path) << R"({"name": "deep", "hidden": 1024, "layers": 8000, "heads": 16, "vocab": 32000,
                             "seq": 1024})";
  return path;
}

// `trace`'s JSON without its first field, the time it was written ({"created":"...Z",...}): two runs of one
// trace are then the same bytes.
std::string without_created(std::string json) {
  const std::string field = "{\"created\":\"";
  if (json.rfind(field, 0) == 0) {
    const auto end = json.find("\",", field.size());
    if (end != std::string::npos) json.erase(1, end + 2 - 1);
  }
  return json;
}

// Starts `headroom ARGS` (split at spaces) with `env` ("NAME=VALUE") added to this environment, stdout and
// stderr to `log`.out and `log`.err, the cleanup signals at their default action (`ignored`, when given, is
// ignored, as nohup does) and none blocked, as a shell starts a command in the foreground.
pid_t start(const std::string& args, const std::vector<std::string>& env, const std::string& log,
            int ignored = 0) {
  std::vector<std::string> words{HEADROOM_BIN};
  std::istringstream in(args);
  for (std::string w; in >> w;) words.push_back(w);
  std::vector<std::string> vars{"ASAN_OPTIONS=detect_leaks=0"};  // as cli_support.hpp runs it
  for (char** e = environ; *e; ++e)
    if (std::strncmp(*e, "ASAN_OPTIONS=", 13) != 0) vars.emplace_back(*e);
  vars.insert(vars.end(), env.begin(), env.end());
  std::vector<char*> argv, envp;
  for (auto& w : words) argv.push_back(w.data());
  for (auto& v : vars) envp.push_back(v.data());
  argv.push_back(nullptr);
  envp.push_back(nullptr);
  const std::string out = log + ".out", err = log + ".err";
  const pid_t pid = ::fork();
  if (pid == 0) {  // only async-signal-safe calls from here to execve
    for (const int sig : cleanup_signals) ::signal(sig, sig == ignored ? SIG_IGN : SIG_DFL);
    sigset_t none;
    ::sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    const int o = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int e = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (o < 0 || e < 0 || ::dup2(o, 1) < 0 || ::dup2(e, 2) < 0) ::_exit(126);
    ::execve(argv[0], argv.data(), envp.data());
    ::_exit(127);
  }
  EXPECT_GT(pid, 0) << std::strerror(errno);
  return pid;
}

// Waits for `pid` (at most two minutes, then kills it and fails); returns its wait status.
int wait_for(pid_t pid) {
  const auto deadline = clock_type::now() + std::chrono::minutes(2);
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (clock_type::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      ADD_FAILURE() << "headroom did not end within two minutes";
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return status;
}

// The temporaries in `dir` (results_file.cpp names them ".hr...").
std::vector<std::string> temporaries(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(".hr", 0) == 0) names.push_back(name);
  }
  return names;
}

// Waits until `dir` holds at least `n` temporaries at once (true), or `pid` ended or a minute passed
// (false). Does not reap `pid`.
bool wait_for_temporaries(const std::string& dir, std::size_t n, pid_t pid) {
  const auto deadline = clock_type::now() + std::chrono::minutes(1);
  while (clock_type::now() < deadline) {
    if (temporaries(dir).size() >= n) return true;
    siginfo_t info{};
    if (::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
        info.si_pid == pid)
      return false;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return false;
}

std::string described(int status) {
  if (WIFEXITED(status)) return "exit " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return std::string("killed by ") + ::strsignal(WTERMSIG(status));
  return "status " + std::to_string(status);
}

// Runs `headroom ARGS` to the end; returns its exit status (-1 when it did not exit).
int run_to_end(const std::string& args, const std::string& log, const std::vector<std::string>& env = {}) {
  const int status = wait_for(start(args, env, log));
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

const std::string pause_long = "HEADROOM_TEST_PAUSE_BEFORE_COMMIT_MS=60000";

TEST(OutputSignals, EachCleanupSignalRemovesTheTemporariesAndKillsTheProcess) {
  for (const int sig : cleanup_signals) {
    SCOPED_TRACE(::strsignal(sig));
    const std::string dir = fresh_dir("signal_" + std::to_string(sig));
    const std::string json = dir + "/plan.json", csv = dir + "/plan.csv";
    std::ofstream(json) << "old\n";
    const pid_t pid =
        start(search(64) + " --json " + json + " --csv " + csv + " --force", {pause_long}, dir + "/log");
    // Both temporaries exist, complete: the process sleeps before its renames.
    ASSERT_TRUE(wait_for_temporaries(dir, 2, pid)) << slurp(dir + "/log.err");
    ASSERT_EQ(::kill(pid, sig), 0);
    const int status = wait_for(pid);
    // The status still says the signal killed it (a shell prints 128 + the signal's number).
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == sig) << described(status);
    EXPECT_EQ(temporaries(dir), std::vector<std::string>{});
    EXPECT_EQ(slurp(json), "old\n");  // the file it would have replaced, untouched
    EXPECT_FALSE(fs::exists(csv));    // the file it would have created, absent
  }
}

TEST(OutputSignals, ASignalAtAnyMomentOfALargeWriteLeavesTheOldFileOrTheWholeNewOne) {
  const std::string dir = fresh_dir("signal_large");
  const std::string model = large_trace_model(dir);
  const std::string target = dir + "/trace.json", reference = dir + "/reference.json";
  const std::string args = "trace --model " + model + " --tp 1 --pp 1 --gpus 1 --force --json ";
  ASSERT_EQ(run_to_end(args + reference, dir + "/log"), 0) << slurp(dir + "/log.err");
  const std::string written = slurp(reference), whole = without_created(written);
  ASSERT_GT(written.size(), 20u << 20) << "the trace should take long enough to write to be signalled";
  int mid_write = 0, old_left = 0, whole_left = 0;
  for (int round = 0; round < 12; ++round) {
    const int sig = cleanup_signals[round % 3];
    SCOPED_TRACE("round " + std::to_string(round) + ", " + ::strsignal(sig));
    std::ofstream(target) << "old\n";
    const pid_t pid = start(args + target, {}, dir + "/log");
    // Signalled once its temporary appears (unless this process was too slow to see it), then later and
    // later in its write, and after it.
    if (wait_for_temporaries(dir, 1, pid)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(round * round * 4));
      struct stat st {};
      const auto temps = temporaries(dir);
      if (temps.size() == 1 && ::stat((dir + "/" + temps[0]).c_str(), &st) == 0 &&
          static_cast<std::size_t>(st.st_size) < written.size())
        ++mid_write;
    }
    ::kill(pid, sig);
    const int status = wait_for(pid);
    EXPECT_TRUE((WIFSIGNALED(status) && WTERMSIG(status) == sig) ||
                (WIFEXITED(status) && !WEXITSTATUS(status)))
        << described(status);
    const auto left_behind = temporaries(dir);
    EXPECT_EQ(left_behind, std::vector<std::string>{});
    for (const auto& t : left_behind) fs::remove(dir + "/" + t);  // so the next round starts clean
    const std::string left = without_created(slurp(target));
    if (left == "old\n")
      ++old_left;
    else if (left == whole)
      ++whole_left;
    else
      ADD_FAILURE() << "a target of " << left.size() << " bytes, neither the old file nor the whole new one";
  }
  // The rounds did signal processes in the middle of their write.
  EXPECT_GT(mid_write, 0);
  EXPECT_GT(old_left, 0);
  RecordProperty("mid_write", mid_write);
  RecordProperty("old_left", old_left);
  RecordProperty("whole_left", whole_left);
}

TEST(OutputSignals, AnIgnoredSignalStaysIgnoredAndTheOutputIsWritten) {
  // nohup starts a command with SIGHUP ignored: the hangup does not stop it, and its file is written whole.
  const std::string dir = fresh_dir("signal_ignored");
  const std::string csv = dir + "/plan.csv", reference = dir + "/reference.csv";
  ASSERT_EQ(run_to_end(search(64) + " --csv " + reference, dir + "/log"), 0) << slurp(dir + "/log.err");
  const pid_t pid =
      start(search(64) + " --csv " + csv, {"HEADROOM_TEST_PAUSE_BEFORE_COMMIT_MS=500"}, dir + "/log", SIGHUP);
  ASSERT_TRUE(wait_for_temporaries(dir, 1, pid)) << slurp(dir + "/log.err");
  ASSERT_EQ(::kill(pid, SIGHUP), 0);
  const int status = wait_for(pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << described(status);
  EXPECT_EQ(slurp(csv), slurp(reference));
  EXPECT_EQ(temporaries(dir), std::vector<std::string>{});
}

TEST(OutputSignals, TwoWritersOfOneTargetLeaveTheWholeFileOfOne) {
  const std::string dir = fresh_dir("two_writers");
  const std::string target = dir + "/plan.csv";
  const std::string a = dir + "/a.csv", b = dir + "/b.csv";
  ASSERT_EQ(run_to_end(search(64) + " --csv " + a, dir + "/log"), 0) << slurp(dir + "/log.err");
  ASSERT_EQ(run_to_end(search(128) + " --csv " + b, dir + "/log"), 0) << slurp(dir + "/log.err");
  const std::string whole_a = slurp(a), whole_b = slurp(b);
  ASSERT_NE(whole_a, whole_b);
  std::ofstream(target) << "old\n";
  // Held before their renames, both processes' temporaries of the one target exist at once, under names of
  // their own; then each rename replaces the target whole.
  const std::vector<std::string> pause{"HEADROOM_TEST_PAUSE_BEFORE_COMMIT_MS=3000"};
  const pid_t pa = start(search(64) + " --force --csv " + target, pause, dir + "/log_a");
  const pid_t pb = start(search(128) + " --force --csv " + target, pause, dir + "/log_b");
  EXPECT_TRUE(wait_for_temporaries(dir, 2, pa)) << "the two temporaries never coexisted";
  const int sa = wait_for(pa), sb = wait_for(pb);
  EXPECT_TRUE(WIFEXITED(sa) && WEXITSTATUS(sa) == 0) << described(sa) << ": " << slurp(dir + "/log_a.err");
  EXPECT_TRUE(WIFEXITED(sb) && WEXITSTATUS(sb) == 0) << described(sb) << ": " << slurp(dir + "/log_b.err");
  const std::string left = slurp(target);
  EXPECT_TRUE(left == whole_a || left == whole_b)
      << "a target of " << left.size() << " bytes, of neither writer";
  EXPECT_EQ(temporaries(dir), std::vector<std::string>{});
  // Unpaused, racing on a large output, a few times: always one writer's whole file.
  const std::string model = large_trace_model(dir);
  const std::string ta = dir + "/ta.json", tb = dir + "/tb.json", trace = dir + "/trace.json";
  const std::string args = "trace --model " + model + " --gpus 1 --force --json ";
  ASSERT_EQ(run_to_end(args + ta + " --seq 1024", dir + "/log"), 0) << slurp(dir + "/log.err");
  ASSERT_EQ(run_to_end(args + tb + " --seq 512", dir + "/log"), 0) << slurp(dir + "/log.err");
  const std::string trace_a = without_created(slurp(ta)), trace_b = without_created(slurp(tb));
  ASSERT_NE(trace_a, trace_b);
  for (int round = 0; round < 3; ++round) {
    const pid_t qa = start(args + trace + " --seq 1024", {}, dir + "/log_a");
    const pid_t qb = start(args + trace + " --seq 512", {}, dir + "/log_b");
    const int ra = wait_for(qa), rb = wait_for(qb);
    EXPECT_TRUE(WIFEXITED(ra) && WEXITSTATUS(ra) == 0) << described(ra) << ": " << slurp(dir + "/log_a.err");
    EXPECT_TRUE(WIFEXITED(rb) && WEXITSTATUS(rb) == 0) << described(rb) << ": " << slurp(dir + "/log_b.err");
    const std::string got = without_created(slurp(trace));
    EXPECT_TRUE(got == trace_a || got == trace_b)
        << "a trace of " << got.size() << " bytes, of neither writer";
    EXPECT_EQ(temporaries(dir), std::vector<std::string>{});
  }
}

TEST(OutputSignals, WithoutForceTheSecondWriterOfANewTargetDoesNotReplaceTheFirst) {
  // Both find the target absent when they start; the first rename creates it, and the second is refused
  // (exit 7) rather than silently replacing it.
  const std::string dir = fresh_dir("two_writers_no_force");
  const std::string target = dir + "/plan.csv";
  const std::string a = dir + "/a.csv", b = dir + "/b.csv";
  ASSERT_EQ(run_to_end(search(64) + " --csv " + a, dir + "/log"), 0) << slurp(dir + "/log.err");
  ASSERT_EQ(run_to_end(search(128) + " --csv " + b, dir + "/log"), 0) << slurp(dir + "/log.err");
  const std::vector<std::string> pause{"HEADROOM_TEST_PAUSE_BEFORE_COMMIT_MS=3000"};
  const pid_t pa = start(search(64) + " --csv " + target, pause, dir + "/log_a");
  const pid_t pb = start(search(128) + " --csv " + target, pause, dir + "/log_b");
  EXPECT_TRUE(wait_for_temporaries(dir, 2, pa)) << "the two temporaries never coexisted";
  const int sa = wait_for(pa), sb = wait_for(pb);
  ASSERT_TRUE(WIFEXITED(sa) && WIFEXITED(sb)) << described(sa) << ", " << described(sb);
  const int ea = WEXITSTATUS(sa), eb = WEXITSTATUS(sb);
  ASSERT_TRUE((ea == 0 && eb == 7) || (ea == 7 && eb == 0)) << "exits " << ea << " and " << eb;
  const std::string loser_err = slurp(dir + (ea == 7 ? "/log_a.err" : "/log_b.err"));
  EXPECT_NE(loser_err.find("refusing to overwrite it"), std::string::npos) << loser_err;
  EXPECT_EQ(slurp(target), slurp(ea == 0 ? a : b));
  EXPECT_EQ(temporaries(dir), std::vector<std::string>{});
}

TEST(OutputSignals, AnOutputFileThatCannotBeWrittenLeavesStdoutEmpty) {
  // A name over 255 bytes passes the checks before the work, then cannot be created: exit 7, one line on
  // stderr, nothing on stdout (the command failed; docs/exit-statuses.md).
  const std::string dir = fresh_dir("exit7");
  const std::string too_long = dir + "/" + std::string(300, 'n');
  const auto r = run("trace --preset llama3-8b --gpus 1 --json " + too_long);
  EXPECT_EQ(r.status, 7) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(lines(r.err), 1) << r.err;
  const auto s = run("snapshot " + data +
                     "/snapshots/NiuHuangxiaozi__forward_memory_snapshot_100.pickle --json " + too_long);
  EXPECT_EQ(s.status, 7) << s.err;
  EXPECT_EQ(s.out, "");
  EXPECT_EQ(temporaries(dir), std::vector<std::string>{});
}

// plan, too, commits its outputs before it prints the table (cli/plan_command.cpp, plan_run::finish), as probe,
// snapshot, trace, calibrate and report do.
TEST(OutputSignals, APlanWhoseOutputFileCannotBeWrittenLeavesStdoutEmpty) {
  const std::string dir = fresh_dir("exit7_plan");
  const auto r = run(search(64) + " --csv " + dir + "/" + std::string(300, 'n'));
  EXPECT_EQ(r.status, 7) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(temporaries(dir), std::vector<std::string>{});
}

}  // namespace
