#!/usr/bin/env bash
# multi_rank_test.sh: the multi-rank probe under a real `mpirun --oversubscribe -np N` on the sim backend, on
# any CPU. Checks, from the files rank 0 writes: every rank answered with its own record; its coordinates
# are Megatron's order (tp fastest, then cp, dp, pp); each rank's predicted figures are the planner's for
# its stage (`headroom plan --json`, an independent path); the replayed peaks are ordered (requested <=
# allocated <= reserved) and a rank's requested peak equals its stage's step peak (the sim replays the
# planner's ledger); the worst rank is a rank of the planner's worst stage; stdout names the files written.
# Then refusals, each exit 2 with exactly one "headroom:" line and no file: a directory in the way of a
# rank's record, launcher variables that disagree with MPI's world, an option a multi-rank probe refuses.
# Then a rank that hangs: the run ends after --rank-timeout with the others' records and names the
# missing rank.
# Usage: multi_rank_test.sh HEADROOM NP
set -euo pipefail
headroom=$1
np=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
# Sanitizer builds: OpenMPI's own allocations are not ours to report.
export ASAN_OPTIONS=${ASAN_OPTIONS:-}:detect_leaks=0
case $np in
  4) layout=(--tp 2 --pp 2 --zero 1) ;;
  8) layout=(--tp 2 --pp 2 --zero 3 --recompute selective --global-batch 64) ;;
  *) layout=(--pp "$np" --zero 1) ;;
esac
model=(--preset gpt3-1.3b --gpus "$np")
"$headroom" plan "${model[@]}" "${layout[@]}" --json >"$work/plan.json" || [ $? -eq 3 ]
timeout -k 10 300 mpirun -np "$np" "$headroom" probe replay "${model[@]}" "${layout[@]}" --json "$work/run.json" \
  >"$work/table.txt"
cat "$work/table.txt"
python3 - "$work" "$np" <<'PY'
import glob, json, os, sys
work, np = sys.argv[1], int(sys.argv[2])
plan = json.load(open(os.path.join(work, "plan.json")))
summary = json.load(open(os.path.join(work, "run.json")))
assert summary["schema"].startswith("headroom.multi_rank/1"), summary["schema"]
assert summary["tool"] == "headroom" and summary["created"], summary  # the envelope
assert summary["world_size"] == np and summary["missing_ranks"] == [] and summary["failed_ranks"] == []
tp, cp, pp = (plan["layout"][k] for k in ("tp", "cp", "pp"))
dp = np // (tp * cp * pp)
stages = {s["stage"]: s for s in plan["stages"]}
files = sorted(glob.glob(os.path.join(work, "run.rank*.json")))
assert len(files) == np, files
worst_peak = max(s["step_peak_bytes"] for s in plan["stages"])
for f in files:
    rec = json.load(open(f))
    r = rec["rank"]["rank"]
    c = rec["rank"]["coordinates"]
    want = {"tp": r % tp, "cp": r // tp % cp, "dp": r // (tp * cp) % dp, "pp": r // (tp * cp * dp)}
    assert c == want, (r, c, want)
    assert rec["rank"]["world_size"] == np
    assert rec["stage"] == c["pp"], (r, rec["stage"])
    st = stages[c["pp"]]
    for k in ("persistent_bytes", "transient_bytes", "step_peak_bytes", "total_bytes"):
        assert rec["predicted"][k] == st[k], (r, k, rec["predicted"][k], st[k])
    rp = rec["replayed"]
    assert rp["peak_requested_bytes"] <= rp["peak_allocated_bytes"] <= rp["peak_reserved_bytes"], rp
    assert rp["peak_requested_bytes"] == st["step_peak_bytes"], (r, rp["peak_requested_bytes"], st["step_peak_bytes"])
    row = summary["ranks"][r]
    assert row["peak_reserved_bytes"] == rp["peak_reserved_bytes"] and row["coordinates"] == c
w = summary["worst_rank"]
assert stages[summary["ranks"][w]["stage"]]["step_peak_bytes"] == worst_peak
assert summary["worst_rank_agrees_with_planner"] is True
print("multi-rank sim: %d ranks, coordinates, per-stage predictions and the worst rank check out" % np)
PY
last="r.rank$((np - 1)).json"
grep -qF "rank records to $work/run.rank0.json ... $work/run${last#r} ($np of $np ranks)" "$work/table.txt" ||
  { echo "the files written are not named"; exit 1; }

# Refusals under a real launcher: exit 2, exactly one "headroom:" line among the launcher's own, no file.
# Usage: refused NAME WANT CMD...: runs CMD under mpirun with its output in $work/NAME.{out,err}.
refused() {
  local name=$1 want=$2
  shift 2
  set +e
  timeout -k 10 120 mpirun -np "$np" "$@" >"$work/$name.out" 2>"$work/$name.err"
  local rc=$?
  set -e
  local n
  n=$(grep -c '^headroom:' "$work/$name.err" || true)
  if [ "$rc" -ne 2 ] || [ "$n" -ne 1 ] || ! grep -q "^headroom: .*$want" "$work/$name.err" ||
    [ -s "$work/$name.out" ]; then
    cat "$work/$name.out" "$work/$name.err"
    echo "$name: wanted exit 2 and one line with '$want' (got exit $rc, $n lines)"
    exit 1
  fi
  echo "$name: refused in one line: $(grep '^headroom:' "$work/$name.err")"
}
# The refusals do not depend on the world's size: they run once, at the smaller world (np 4 or less).
if [ "$np" -le 4 ]; then
  mkdir "$work/out"
  # A directory in the way of rank 0's record (rank 0 then has no record of its own to write): nothing
  # written, not the summary, not another rank's.
  mkdir "$work/out/r.rank0.json"
  refused in_the_way "r.rank0.json' exists and is not a regular file" \
    "$headroom" probe replay "${model[@]}" "${layout[@]}" --json "$work/out/r.json"
  [ "$(ls "$work/out")" = r.rank0.json ] || { ls "$work/out"; echo "in_the_way: files written"; exit 1; }
  # Variables that disagree with MPI's world: on every rank (the size), on all but rank 0 (the rank).
  refused claim_size "OMPI_COMM_WORLD_SIZE=$((2 * np))) but MPI's world has $np" \
    env OMPI_COMM_WORLD_SIZE=$((2 * np)) "$headroom" probe replay "${model[@]}" "${layout[@]}" \
    --json "$work/out/c.json"
  refused claim_rank "say rank 0 (OMPI_COMM_WORLD_RANK) but MPI says rank 1" \
    env OMPI_COMM_WORLD_RANK=0 "$headroom" probe replay "${model[@]}" "${layout[@]}" --json "$work/out/c.json"
  # Options a multi-rank probe cannot take: every rank refuses, rank 0 alone says it.
  refused rank_timeout "rank-timeout: must be between 0 and 86400 seconds" \
    "$headroom" probe replay "${model[@]}" "${layout[@]}" --rank-timeout -1
  [ "$(ls "$work/out")" = r.rank0.json ] || { ls "$work/out"; echo "refusals wrote files"; exit 1; }
fi

# A rank that hangs: rank 0 ends the run after the timeout, writes what it has, names the missing rank.
hang=$((np - 1))
set +e
HEADROOM_TEST_RANK_FAULT="$hang:hang" timeout -k 10 40 mpirun -np "$np" -x HEADROOM_TEST_RANK_FAULT "$headroom" probe replay \
  "${model[@]}" "${layout[@]}" --rank-timeout 3 --json "$work/hang.json" >"$work/hang.txt" 2>&1
rc=$?
set -e
# Rank 0 names the missing rank, writes what it has and exits 5; the launcher then ends the rest. That
# last part is the launcher's: OpenMPI 4.1.4's mpirun was seen, on this loaded 2-core machine, to die of
# SIGSEGV (139) or to linger (killed by the guard, 137) while tearing such a job down, after rank 0 had
# finished. Rank 0's part is what is checked: its summary below, written before it exited.
case $rc in
  0) cat "$work/hang.txt"; echo "hung rank: the run exited 0"; exit 1 ;;
  124|137) echo "note: mpirun outlived the 40 s guard after rank 0 ended the run (the launcher's teardown)" ;;
esac
grep -q "no answer from rank(s) $hang within --rank-timeout" "$work/hang.txt" ||
  { cat "$work/hang.txt"; echo "hung rank not named"; exit 1; }
pkill -f -- "$work/hang.json" 2>/dev/null || true  # a rank the launcher left behind
python3 - "$work/hang.json" "$hang" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
assert s["missing_ranks"] == [int(sys.argv[2])], s["missing_ranks"]
assert sum(1 for r in s["ranks"] if r["answered"]) == len(s["ranks"]) - 1
PY
echo "multi-rank sim: a hung rank ends the run after --rank-timeout and is named"
