#!/usr/bin/env bash
# torch_replay_selftest.sh: runs probes/trace/torch_replay.py over a trace and emulation records from the built
# headroom, so the script's CPU self-test (and, where PyTorch and a GPU exist, the comparison) runs in ctest.
# Usage: torch_replay_selftest.sh HEADROOM SOURCE_DIR
set -euo pipefail
H=$1
SRC=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
flags="--preset gpt3-1.3b --gpus 4 --zero 3 --recompute selective"
"$H" trace $flags --json "$dir/trace.json" >/dev/null
"$H" probe replay $flags --trace "$dir/trace.json" --json "$dir/default.json" >/dev/null
"$H" probe replay $flags --trace "$dir/trace.json" --expandable-segments --json "$dir/expandable.json" >/dev/null
python3 "$SRC/probes/trace/torch_replay.py" "$dir/trace.json" --emulated "default=$dir/default.json" \
  --emulated "expandable=$dir/expandable.json" --out "$dir/comparison.json"
python3 -c "import json,sys; r=json.load(open(sys.argv[1])); assert r['schema']=='headroom.torch_replay/1'" \
  "$dir/comparison.json"
# A malformed trace is bad input (exit 2), not a crash.
echo '{"schema": "headroom.trace/1", "tensors": [{"name": "x", "bytes": 8}], "events": [["free", 0, "forward"]]}' \
  > "$dir/bad.json"
set +e
python3 "$SRC/probes/trace/torch_replay.py" "$dir/bad.json" 2>"$dir/err"
status=$?
set -e
[ $status -eq 2 ] && grep -q "which is not allocated" "$dir/err"
