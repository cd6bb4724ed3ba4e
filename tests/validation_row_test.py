#!/usr/bin/env python3
# validation_row_test.py: tools/validation-row against the pack reader itself. A row built from plan flags
# is appended with the other lines of the pack left as they were, reads back through `headroom validate
# --pack` with the predicted outcome the flags give (a 70B model on one 80 GiB GPU does not fit), and keeps
# the pack's permissions; a duplicate id, bad --published JSON or a refused plan leave the pack untouched
# with exit 1 and one line.
# Usage: validation_row_test.py HEADROOM SOURCE_DIR
import json
import os
import subprocess
import sys
import tempfile

headroom, source = sys.argv[1], sys.argv[2]
tool = os.path.join(source, "tools", "validation-row")
failures = []


def check(ok, what):
    if not ok:
        failures.append(what)


def run_tool(pack, row_id, published='{"gpu": "A100 80GB"}', flags=None):
    flags = flags or ["--preset", "llama2-70b", "--gpus", "1", "--gpu-type", "a100-80gb"]
    return subprocess.run([sys.executable, tool, headroom, "--pack", pack, "--id", row_id, "--kind", "oom",
                           "--citation", "a test", "--published", published, "--expresses",
                           "published: nothing; assumed: everything", "--", *flags],
                          capture_output=True, text=True)


with tempfile.TemporaryDirectory() as d:
    pack = os.path.join(d, "pack.json")
    original = '{\n "schema": "headroom.validation/2",\n "about": "a test pack",\n "rows": [\n ]\n}\n'
    with open(pack, "w") as f:
        f.write(original)
    os.chmod(pack, 0o644)
    r = run_tool(pack, "70B on one A100: OOM")
    check(r.returncode == 0, f"first row: exit {r.returncode}: {r.stderr}")
    text = open(pack).read()
    check(text.startswith('{\n "schema": "headroom.validation/2",\n "about": "a test pack",'), "head kept")
    check(oct(os.stat(pack).st_mode & 0o777) == "0o644", "permissions kept")
    rows = json.loads(text)["rows"]
    check(len(rows) == 1 and rows[0]["problem"]["model"]["layers"] == 80, "the row holds the plan's model")
    check(rows[0]["layout"]["gpus"] == 1, "the row holds the plan's layout")
    v = subprocess.run([headroom, "validate", "--pack", pack], capture_output=True, text=True)
    check(v.returncode == 0 and "1 of 1 agree" in v.stdout, f"validate: exit {v.returncode}: {v.stdout[-300:]}")
    r = run_tool(pack, "second row", flags=["--preset", "gpt3-1.3b", "--gpus", "8", "--gpu-type", "a100-80gb"])
    check(r.returncode == 0, "second row")
    check(len(json.loads(open(pack).read())["rows"]) == 2, "two rows")
    before = open(pack).read()
    for row_id, published, flags, what in [
            ("second row", '{"gpu": "x"}', None, "duplicate id"),
            ("third", "not json", None, "bad --published"),
            ("third", '{"gpu": "x"}', ["--preset", "no-such-model", "--gpus", "8"], "refused plan")]:
        r = run_tool(pack, row_id, published, flags)
        check(r.returncode == 1, f"{what}: exit {r.returncode}")
        check(len(r.stderr.strip().splitlines()) == 1, f"{what}: one line, got {r.stderr!r}")
        check(open(pack).read() == before, f"{what}: pack untouched")
    check(sorted(os.listdir(d)) == ["pack.json"], f"no temporary file left: {os.listdir(d)}")

    # Measured rows: a priced one reads back with its figure priced (the allocator emulation), a skipped one
    # is listed with its reason; a skipped row with plan flags, or a measured row without its figure, is
    # refused leaving the pack as it was.
    def run_measured(row_id, published, extra, flags):
        return subprocess.run([sys.executable, tool, headroom, "--pack", pack, "--id", row_id, "--kind",
                               "measured_peak", "--citation", "a test", "--published", published, *extra,
                               *(["--", *flags] if flags else [])], capture_output=True, text=True)
    measured = '{"gib": 40.0, "figure": "reserved_peak", "how": "max_reserved", "gpu": "A100 80GB"}'
    r = run_measured("measured", measured, ["--expresses", "published: 40; assumed: all", "--calibration",
                                           "held_out"], ["--preset", "gpt3-1.3b", "--gpus", "8"])
    check(r.returncode == 0, f"measured row: {r.stderr}")
    r = run_measured("skipped", measured, ["--skipped", "not modelled: a setting"], None)
    check(r.returncode == 0, f"skipped row: {r.stderr}")
    rows = json.loads(open(pack).read())["rows"]
    check(rows[-2]["calibration"] == "held_out" and "problem" in rows[-2], "measured row carries its case")
    check(rows[-1]["skipped"] == "not modelled: a setting" and "problem" not in rows[-1], "skipped: no case")
    v = subprocess.run([headroom, "validate", "--pack", pack], capture_output=True, text=True)
    check("measured memory figures: 1 priced, 1 skipped" in v.stdout, f"validate: {v.stdout[-400:]}")
    before = open(pack).read()
    for row_id, published, extra, flags, what in [
            ("x1", measured, ["--skipped", "why"], ["--preset", "gpt3-1.3b", "--gpus", "8"], "skipped with flags"),
            ("x2", '{"gib": 40.0}', ["--expresses", "e"], ["--preset", "gpt3-1.3b", "--gpus", "8"], "no figure"),
            ("x3", measured, ["--skipped", " "], None, "empty reason"),
            ("x4", '{"gib": 40.0, "figure": "reserved_peak", "stage": 3}', ["--expresses", "e"],
             ["--preset", "gpt3-1.3b", "--gpus", "8"], "a stage outside the pipeline"),
            ("x5", '{"gib": 40.0, "figure": "allocated_peak"}', ["--expresses", "e", "--calibration", "fit"],
             ["--preset", "gpt3-1.3b", "--gpus", "8"], "an allocated peak fitted on")]:
        r = run_measured(row_id, published, extra, flags)
        check(r.returncode == 1, f"{what}: exit {r.returncode}")
        check(len(r.stderr.strip().splitlines()) == 1, f"{what}: one line, got {r.stderr!r}")
        check(open(pack).read() == before, f"{what}: pack untouched")

for f in failures:
    print("FAIL", f)
print(f"validation_row_test: {len(failures)} failures")
sys.exit(1 if failures else 0)
