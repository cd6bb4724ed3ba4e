#!/usr/bin/env python3
"""torch_replay.py: replay a headroom step trace through PyTorch's own CUDA caching allocator.

Reads a trace written by `headroom trace ... --json TRACE`, performs its allocations and frees in order on
one stream (torch.empty of uint8 for the tensor's bytes, del when freed), and prints PyTorch's peak
requested / allocated / reserved bytes (torch.cuda.memory_stats) next to headroom's emulation of the same
trace, once with the default allocator settings and once with expandable_segments:True. Each setting runs
in its own process, because PYTORCH_CUDA_ALLOC_CONF is read when CUDA starts.

  probes/trace/torch_replay.py TRACE.json [--emulated default=M1.json] [--emulated expandable=M2.json] [--out R.json]

M1 / M2 are measurement records from `headroom probe replay --trace TRACE.json --json M` (add
--expandable-segments for M2). Without torch or without a CUDA device the script checks what it can on the
CPU (the trace is well formed; its peak live bytes equal the emulation's peak requested) and says what it
could not check. Exit status: 0 checks passed, 1 a check failed, 2 bad input.
"""
import argparse
import json
import os
import subprocess
import sys

SETTINGS = {"default": "", "expandable": "expandable_segments:True"}
TOLERANCE = 0.01  # the emulation should match PyTorch's reserved peak within 1%


def fail_input(msg):
    print(f"torch_replay: bad input: {msg}", file=sys.stderr)
    sys.exit(2)


def load_json(path):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except OSError as e:
        fail_input(f"{path}: cannot open ({e.strerror})")
    except json.JSONDecodeError as e:
        fail_input(f"{path}: malformed JSON ({e.msg} at line {e.lineno})")


def check_trace(trace, path):
    """Returns the trace's peak live bytes after checking every event; exits 2 on a malformed trace."""
    if not isinstance(trace, dict) or not str(trace.get("schema", "")).startswith("headroom.trace/1"):
        fail_input(f"{path}: not a headroom.trace/1 file")
    tensors, events = trace.get("tensors"), trace.get("events")
    if not isinstance(tensors, list) or not isinstance(events, list):
        fail_input(f"{path}: tensors and events must be arrays")
    live, now, peak = set(), 0, 0
    for i, e in enumerate(events):
        if not (isinstance(e, list) and len(e) in (3, 4) and e[0] in ("alloc", "free", "empty_cache")
                and isinstance(e[1], int) and (len(e) == 3 or isinstance(e[3], int))):
            fail_input(f"{path}: event {i} is not [alloc|free|empty_cache, tensor, phase(, stream)]")
        kind, t = e[0], e[1]
        if kind == "empty_cache":
            continue
        if not 0 <= t < len(tensors):
            fail_input(f"{path}: event {i} names tensor {t}, which does not exist")
        size = tensors[t]["bytes"]
        if kind == "alloc":
            if t in live:
                fail_input(f"{path}: event {i} allocates tensor '{tensors[t]['name']}' twice")
            live.add(t)
            now += size
            peak = max(peak, now)
        else:
            if t not in live:
                fail_input(f"{path}: event {i} frees tensor '{tensors[t]['name']}', which is not allocated")
            live.remove(t)
            now -= size
    return peak


def child(trace_path):
    """Runs in a subprocess with PYTORCH_CUDA_ALLOC_CONF set; prints one JSON line of PyTorch's stats."""
    import torch  # noqa: imported here so the parent runs without torch

    trace = load_json(trace_path)
    tensors, events = trace["tensors"], trace["events"]
    torch.cuda.init()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    live, oom, streams = {}, None, {0: torch.cuda.current_stream()}
    for i, e in enumerate(events):
        kind, t, stream = e[0], e[1], (e[3] if len(e) == 4 else 0)
        if kind == "empty_cache":
            torch.cuda.empty_cache()
        elif kind == "alloc":
            if stream not in streams:
                streams[stream] = torch.cuda.Stream()
            try:
                with torch.cuda.stream(streams[stream]):
                    live[t] = torch.empty(tensors[t]["bytes"], dtype=torch.uint8, device="cuda")
            except torch.cuda.OutOfMemoryError:
                oom = i
                break
        else:
            del live[t]
    torch.cuda.synchronize()
    s = torch.cuda.memory_stats()
    props = torch.cuda.get_device_properties(0)
    print(json.dumps({
        "peak_requested_bytes": s.get("requested_bytes.all.peak"),
        "peak_allocated_bytes": s.get("allocated_bytes.all.peak"),
        "peak_reserved_bytes": s.get("reserved_bytes.all.peak"),
        "alloc_retries": s.get("num_alloc_retries"),
        "ooms": s.get("num_ooms"),
        "oom_event": oom,
        "gpu": props.name,
        "gpu_total_bytes": props.total_memory,
        "torch": torch.__version__,
        "cuda_runtime": torch.version.cuda,
    }))


def torch_status():
    """Returns None when PyTorch with a CUDA device is usable here, else the reason it is not."""
    try:
        import torch
    except ImportError as e:
        return f"PyTorch is not importable ({e})"
    if not torch.cuda.is_available():
        return "PyTorch sees no CUDA device"
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("trace")
    ap.add_argument("--emulated", action="append", default=[], metavar="SETTING=FILE",
                    help="headroom's measurement record for a setting (default, expandable)")
    ap.add_argument("--out", help="write the comparison as JSON (refuses to overwrite)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.trace)
        return 0

    trace = load_json(args.trace)
    peak = check_trace(trace, args.trace)
    emulated = {}
    for item in args.emulated:
        name, _, path = item.partition("=")
        if name not in SETTINGS or not path:
            fail_input(f"--emulated {item}: expected default=FILE or expandable=FILE")
        record = load_json(path)
        if not str(record.get("schema", "")).startswith("headroom.measurement/1"):
            fail_input(f"{path}: not a headroom.measurement/1 record")
        emulated[name] = record["replayed"]
    if args.out and os.path.exists(args.out):
        fail_input(f"{args.out} exists; refusing to overwrite it")

    ok = True
    print(f"trace {args.trace}: {trace.get('model')} {trace.get('layout')}, stage {trace.get('stage')}, "
          f"{len(trace['events'])} events, peak live {peak / 2**30:.3f} GiB")
    for name, rec in emulated.items():
        same = rec["peak_requested_bytes"] == peak
        ok &= same
        print(f"  self-test: emulation ({name}) peak requested {'equals' if same else 'DIFFERS FROM'} the trace's "
              f"peak live bytes")

    why_not = torch_status()
    result = {"schema": "headroom.torch_replay/1", "trace": args.trace, "trace_peak_live_bytes": peak,
              "settings": {}, "not_checked": why_not}
    if why_not:
        print(f"  not checked: PyTorch's allocator, because {why_not}")
    else:
        print(f"  {'setting':<12}{'':>16}{'emulated':>14}{'pytorch':>14}{'diff':>9}")
        for name, conf in SETTINGS.items():
            env = dict(os.environ, PYTORCH_CUDA_ALLOC_CONF=conf)
            proc = subprocess.run([sys.executable, __file__, args.trace, "--child", "1"], env=env,
                                  capture_output=True, text=True)
            if proc.returncode != 0:
                print(f"  {name}: the PyTorch replay failed: {proc.stderr.strip().splitlines()[-1:]}")
                ok = False
                continue
            torch_stats = json.loads(proc.stdout.strip().splitlines()[-1])
            entry = {"pytorch": torch_stats, "emulated": emulated.get(name)}
            for key in ("peak_allocated_bytes", "peak_reserved_bytes"):
                mine = emulated.get(name, {}).get(key)
                theirs = torch_stats[key]
                diff = None if mine is None or not theirs else (mine - theirs) / theirs
                entry[key.replace("_bytes", "_relative_difference")] = diff
                shown = "-" if mine is None else f"{mine / 2**30:.3f}"
                print(f"  {name:<12}{key[5:-6]:>16}{shown:>14}{theirs / 2**30:>14.3f}"
                      f"{'' if diff is None else f'{100 * diff:+.2f}%':>9}")
                if key == "peak_reserved_bytes" and diff is not None and abs(diff) > TOLERANCE:
                    ok = False
            result["settings"][name] = entry
    if args.out:
        tmp = f"{args.out}.tmp.{os.getpid()}"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=2)
            f.write("\n")
        os.replace(tmp, args.out)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
