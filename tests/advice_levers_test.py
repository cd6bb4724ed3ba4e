#!/usr/bin/env python3
# advice_levers_test.py: every lever the advice under a "does not fit" names is run (issue 31 item 5: "every
# 'what would help' names a flag that exists and, run, changes the verdict").
#
# Usage: tests/advice_levers_test.py HEADROOM SOURCE_DIR      (registered in tests/CMakeLists.txt, label docs)
#
# For each case below (dense state-bound, activation-bound, mixture-of-experts, and the three launch importers)
# the plan must not fit and print advice. Each lever's setting is read from its line and applied as the line
# says: a plain flag added (or replacing the same flag), Megatron's flags appended to --megatron-args, a
# --torchtitan-override, a key set in a copy of the DeepSpeed JSON, or --gpus N for "the smallest count". The
# re-run must be accepted (not exit 2: the flag exists and applies). A lever that claims to be enough (every one
# but those marked "not enough alone", context parallelism, and the searches) must then fit (exit 0); context
# parallelism must cut the activations as it claims (seq / cp); an 8-bit optimizer "not enough alone" must
# still cut the state; "--suggest" and "--min-gpus" must run.
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile

ZOO_VARS = ("--megatron-var TP=1 --megatron-var PP=1 --megatron-var EP=8 --megatron-var CP=1 "
            "--megatron-var LAYERS_PER_VP=false --megatron-var MBS=1 --megatron-var GBS=256 "
            "--megatron-var SEQ_LEN=4096 --megatron-var MOE_TOKEN_DISPATCHER=alltoall "
            "--megatron-var MOE_GROUPED_GEMM=true")

# (name, plan arguments): each must end in "does not fit" (exit 3) with advice.
CASES = [
    ("dense, state-bound, one layout", "--preset llama3-70b --gpus 8 --gpu-type h100-80gb --zero 1"),
    ("dense, state-bound, search", "--preset llama3-70b --gpus 8 --gpu-type h100-80gb --suggest"),
    ("dense, activation-bound", "--preset llama3-70b --gpus 64 --gpu-type h100-80gb --tp 8 --pp 4 --zero 1 "
                                "--recompute selective --attention flash --seq 32k"),
    ("dense, activation-bound, micro-batch", "--preset llama3-8b --gpus 8 --gpu-type h100-80gb --zero 3 "
                                             "--attention flash --micro-batch 8"),
    ("moe, hf config", "--hf-config tests/data/hf/qwen3-30b-a3b.json --gpus 16 --gpu-type h100-80gb --ep 8 "
                       "--recipe megatron-distopt --zero 1 --attention flash"),
    ("megatron yaml", "--megatron-args tests/data/megatron/Qwen3-30B-A3B.yaml --gpus 16 --gpu-type h100-80gb "
                      + ZOO_VARS),
    ("torchtitan", "--torchtitan-config tests/data/torchtitan/train_configs/qwen3/qwen3_32b.toml --gpus 8 "
                   "--gpu-type h100-80gb"),
    ("deepspeed", "--hf-config tests/data/hf/mistral-7b.json --deepspeed-config "
                  "tests/data/deepspeed/hf_ds_config_zero3_bf16.json --gpus 8 --gpu-type h100-80gb "
                  "--micro-batch 4 --trainer-precision bf16 --gradient-accumulation-steps 1 --attention flash"),
    ("deepspeed, state-bound", "--preset llama3-70b --deepspeed-config tests/data/deepspeed/ds_config_func_bs8_zero2_gas3.json "
                               "--allow-unmodelled --gpus 16 --gpu-type h100-80gb --attention flash --recompute full "
                               "--seq 2048"),
]


def run(headroom, args, cwd):
    """Returns (exit status, stdout + stderr) of `headroom plan ARGS`."""
    p = subprocess.run([headroom, "plan"] + args, cwd=cwd, capture_output=True, text=True, timeout=120)
    return p.returncode, p.stdout + p.stderr


def levers(out):
    """Returns the lever lines under 'what would help:' or 'what moves state:'."""
    lines, found = [], False
    for line in out.splitlines():
        if line in ("what would help:", "what moves state:"):
            found = True
        elif found and line.startswith("  - "):
            lines.append(line[4:])
        elif found:
            break
    return lines


def set_flag(args, flag, values):
    """Returns args with `flag` (and the values after it) replaced by flag + values, or added."""
    out, i = [], 0
    while i < len(args):
        if args[i] == flag:
            i += 1
            while i < len(args) and not args[i].startswith("--"):
                i += 1
            continue
        out.append(args[i])
        i += 1
    return out + [flag] + values


def set_json_key(path, dotted, value, scratch):
    """Returns a copy of the JSON at `path` in `scratch` with the dotted key set to `value` (JSON text)."""
    with open(path) as f:
        doc = json.load(f)
    keys = dotted.split(".")
    node = doc
    for k in keys[:-1]:
        node = node.setdefault(k, {})
    node[keys[-1]] = json.loads(value)
    out = os.path.join(scratch, "edited-" + os.path.basename(path))
    with open(out, "w") as f:
        json.dump(doc, f)
    return out


def applied(args, lever, scratch, cwd):
    """Returns the plan arguments with the lever's setting applied, or None for a search lever."""
    m = re.search(r"append (.+?) to --megatron-args", lever)
    if m:
        i = args.index("--megatron-args")
        return args[:i + 1] + [args[i + 1] + " " + m.group(1)] + args[i + 2:]
    m = re.search(r"--torchtitan-override (\S+?)[;)]", lever)
    if m:
        return args + ["--torchtitan-override", m.group(1)]
    m = re.search(r"set (\S+) (.+?) in the DeepSpeed JSON", lever)
    if m:
        i = args.index("--deepspeed-config")
        edited = set_json_key(os.path.join(cwd, args[i + 1]), m.group(1), m.group(2), scratch)
        return args[:i + 1] + [edited] + args[i + 2:]
    m = re.search(r"smallest count with a fitting layout is (\d+)", lever)
    if m:  # the count the search found, searched again there
        return set_flag(args, "--gpus", [m.group(1)])
    m = re.search(r"\((--[a-z-]+)( [^;)]+)?[;)]", lever)
    if m and m.group(1) not in ("--suggest", "--min-gpus"):
        return set_flag(args, m.group(1), m.group(2).split() if m.group(2) else [])
    return None


def column(out, name):
    """Returns the figure of the worst rank's `name` line (state, activations) in GiB."""
    m = re.search(r"^  " + name + r"\s+(-?[\d.]+) GiB", out, re.M)
    return float(m.group(1)) if m else None


def check_lever(headroom, case, args, base_out, lever, scratch, cwd):
    """Returns the failures of one lever: its setting applied and run."""
    new = applied(args, lever, scratch, cwd)
    if new is None:  # a search: it must run, and one of --suggest / --min-gpus must find a layout
        if "--min-gpus" not in lever and "--suggest" not in lever:
            return ["%s: no setting found in the lever '%s'" % (case, lever)]
        plain = [a for a in args if a != "--suggest"]
        # --min-gpus searches the count: without --gpus, or with it where the launch needs one ("auto" batches)
        minimum = run(headroom, set_flag(plain, "--gpus", [])[:-1] + ["--min-gpus"], cwd)[0]
        if minimum == 2:
            minimum = run(headroom, plain + ["--min-gpus"], cwd)[0]
        codes = [run(headroom, plain + ["--suggest"], cwd)[0], minimum]
        if 2 in codes or 0 not in codes:
            return ["%s: '%s': --suggest / --min-gpus exit %s" % (case, lever, codes)]
        return []
    status, out = run(headroom, new, cwd)  # under --suggest the setting is checked on the search
    shown = " ".join(shlex.quote(a) for a in new)
    if status == 2:
        return ["%s: '%s' is refused: headroom plan %s\n%s" % (case, lever, shown, out)]
    if "--suggest" not in args and "state at best" in lever:
        # a state bound's lever on one layout: it cuts this layout's state, and the search it names (the
        # state bound's "at best" is the most sharded layout) fits when the bound allows it
        before, after = column(base_out, "state"), column(out, "state")
        if before is None or after is None or not after < before:
            return ["%s: '%s' does not cut the state (%s -> %s)" % (case, lever, before, after)]
        search = re.search(r"; (--suggest [^)]*?) search", lever).group(1).split()
        status, out = run(headroom, new + search, cwd)
        if "not enough alone" not in lever and status != 0:
            return ["%s: '%s': %s finds nothing (exit %d)" % (case, lever, " ".join(search), status)]
        return []
    if "not enough alone" in lever:
        before, after = column(base_out, "state"), column(out, "state")
        if "--suggest" in args:  # the search's own bound: the proof's figure moves
            m = re.search(r"state at best ([\d.]+) GiB", lever)
            before, after = float(re.search(r"state alone, ([\d.]+) GiB", base_out).group(1)), float(m.group(1))
        elif "short by" in lever:
            before, after = column(base_out, "headroom"), column(out, "headroom")
            before, after = -before, -after
        if before is not None and after is not None and not after < before:
            return ["%s: '%s' does not improve what it names (%s -> %s)" % (case, lever, before, after)]
        return []
    if lever.startswith("context parallelism"):
        before, after = column(base_out, "activations"), column(out, "activations")
        if status != 0 and not (before and after and after <= before * 0.55):
            return ["%s: '%s': activations %s -> %s, not halved, and exit %d" % (case, lever, before, after, status)]
        return []
    if status != 0:
        return ["%s: '%s' does not fit when applied (exit %d): headroom plan %s\n%s" %
                (case, lever, status, shown, out[-1500:])]
    return []


def main(argv):
    if len(argv) != 3:
        print("usage: advice_levers_test.py HEADROOM SOURCE_DIR", file=sys.stderr)
        return 2
    headroom, cwd = os.path.abspath(argv[1]), os.path.abspath(argv[2])
    failures, checked = [], 0
    with tempfile.TemporaryDirectory() as scratch:
        for case, text in CASES:
            args = shlex.split(text)
            status, out = run(headroom, args, cwd)
            found = levers(out)
            if status != 3 or not found:
                failures.append("%s: expected exit 3 with advice, got exit %d\n%s" % (case, status, out[-1500:]))
                continue
            for lever in found:
                failures += check_lever(headroom, case, args, out, lever, scratch, cwd)
                checked += 1
    for f in failures:
        print("FAIL " + f)
    print("%d levers run over %d cases, %d failures" % (checked, len(CASES), len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
