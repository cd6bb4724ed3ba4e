#!/usr/bin/env python3
"""headroom_capture.py: record a PyTorch memory snapshot of a user's own training, with a sidecar.

Around a few training steps, records the CUDA caching allocator's history with stack frames
(torch.cuda.memory._record_memory_history), dumps the snapshot (a pickle, as
torch.cuda.memory._dump_snapshot writes it) and writes beside it the sidecar SNAPSHOT.headroom.json
(schema headroom.capture/1): the software and GPU stack, the allocator settings, where the process sits in
a multi-rank run, the allocator's peaks and the device memory used at the peak. `headroom snapshot` and
`headroom probe snapshot` read the sidecar when it lies beside the snapshot (docs/snapshots.md).

As a context manager (standard library and torch only):

    from headroom_capture import headroom_capture
    with headroom_capture("captures", problem_file="run.json"):
        for step in range(3):
            train_step()

As a wrapper around a training script, run in this process (runpy) so that the history is recorded:

    python3 tools/headroom_capture.py --out DIR [--name NAME] [--problem FILE | --megatron-args STR]
        [--max-entries N] [--device N] [--force] -- [python3] train.py ARGS...   (or -- -m MODULE ARGS...)

Under a launcher (torchrun, mpirun, srun) each rank writes NAME.rankR.pickle and its sidecar. Exit status:
the training script's own, 2 for bad arguments (one line on stderr), 4 when there is no CUDA device.

Device memory used "at the peak": the driver reports only what is used now (cudaMemGetInfo), not at the
allocator's peak. The sidecar reads it when the capture ends and approximates the figure at the peak as
max_memory_reserved + (used_at_end - memory_reserved_at_end): the memory outside the caching allocator
(CUDA context, NCCL buffers, cuBLAS handles, other processes on the same GPU) is taken to be what it was at
the end. It says so in the sidecar ("device_used_at_peak.how").
"""
import datetime
import inspect
import json
import os
import pickle
import runpy
import sys

SCHEMA = "headroom.capture/1"
SIDECAR_SUFFIX = ".headroom.json"  # the sidecar of SNAPSHOT is SNAPSHOT + this suffix
MAX_PROBLEM_BYTES = 1 << 20  # a problem file is a small JSON / YAML / args file
DEFAULT_MAX_ENTRIES = 1_000_000  # allocator events kept (about 80 MB of pickle; docs/snapshots.md)
EXIT_BAD_INPUT = 2
EXIT_NO_DEVICE = 4

# Where a launcher says the process sits: (launcher, rank, local rank, world size, variable that must be set)
# variables, first match wins. torchrun sets RANK / LOCAL_RANK / WORLD_SIZE (torch/distributed/run.py's
# documentation, "environment variables"); the others in the order and with the variables that
# probes/ranks/launch.cpp (detect_launch) reads for headroom's own probes: Open MPI's OMPI_COMM_WORLD_*,
# Slurm's srun (SLURM_PROCID, the step's SLURM_STEP_NUM_TASKS, only inside a step), MPICH / Intel MPI's PMI.
LAUNCHERS = [
    ("torchrun", "RANK", "LOCAL_RANK", "WORLD_SIZE", None),
    ("openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_SIZE", None),
    ("slurm", "SLURM_PROCID", "SLURM_LOCALID", "SLURM_STEP_NUM_TASKS", "SLURM_STEP_ID"),
    ("pmi", "PMI_RANK", "MPI_LOCALRANKID", "PMI_SIZE", None),
]


class CaptureError(Exception):
    """Bad input or environment: one line, naming the argument or variable."""

    def __init__(self, message, status=EXIT_BAD_INPUT):
        super().__init__(message)
        self.status = status


def _int_var(env, name):
    text = env.get(name)
    if text is None or text == "":
        return None
    try:
        value = int(text, 10)
    except ValueError:
        raise CaptureError(f"{name}='{text}' is not an integer") from None
    if value < 0 or value > 1_000_000:
        raise CaptureError(f"{name}={value} is out of range (0 to 1000000)")
    return value


def placement(env=None):
    """Returns {"launcher", "rank", "local_rank", "world_size"}: from the first launcher whose rank variable
    is set, else a single process (launcher None, rank 0 of 1). Raises CaptureError on a malformed value."""
    env = os.environ if env is None else env
    for launcher, rank_var, local_var, size_var, requires in LAUNCHERS:
        if requires is not None and env.get(requires) is None:
            continue
        rank = _int_var(env, rank_var)
        if rank is None:
            continue
        size = _int_var(env, size_var)
        local = _int_var(env, local_var)
        if size is not None and rank >= size:
            raise CaptureError(f"{rank_var}={rank} is not below {size_var}={size}")
        return {"launcher": launcher, "rank": rank, "local_rank": local,
                "world_size": size, "variables": [rank_var, local_var, size_var]}
    return {"launcher": None, "rank": 0, "local_rank": None, "world_size": 1, "variables": []}


def snapshot_name(name, where):
    """Returns the snapshot's file name: NAME.pickle alone, NAME.rankR.pickle under a launcher."""
    if where["launcher"] is None:
        return f"{name}.pickle"
    return f"{name}.rank{where['rank']}.pickle"


def read_problem(problem_file=None, megatron_args=None):
    """Returns the sidecar's "problem" block, or None. Raises CaptureError for an unreadable file."""
    if problem_file is not None and megatron_args is not None:
        raise CaptureError("give --problem or --megatron-args, not both")
    if megatron_args is not None:
        if not isinstance(megatron_args, str) or not megatron_args.strip():
            raise CaptureError("--megatron-args: empty")
        return {"kind": "megatron_args", "text": megatron_args}
    if problem_file is None:
        return None
    try:
        with open(problem_file, "rb") as f:
            data = f.read(MAX_PROBLEM_BYTES + 1)
    except OSError as e:
        raise CaptureError(f"--problem {problem_file}: cannot read ({e.strerror})") from None
    if len(data) > MAX_PROBLEM_BYTES:
        raise CaptureError(f"--problem {problem_file}: larger than {MAX_PROBLEM_BYTES} bytes")
    if not data.strip():
        raise CaptureError(f"--problem {problem_file}: empty")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise CaptureError(f"--problem {problem_file}: not UTF-8 text") from None
    return {"kind": "file", "path": os.path.abspath(problem_file), "text": text}


def _driver_version():
    """Returns (driver, how): NVML's driver version through ctypes, else the CUDA driver API's version."""
    import ctypes
    try:
        nvml = ctypes.CDLL("libnvidia-ml.so.1")
        if nvml.nvmlInit_v2() == 0:
            buf = ctypes.create_string_buffer(96)
            ok = nvml.nvmlSystemGetDriverVersion(buf, ctypes.c_uint(96)) == 0
            nvml.nvmlShutdown()
            if ok:
                return buf.value.decode("ascii", "replace"), "nvml"
    except (OSError, AttributeError):
        pass
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
        v = ctypes.c_int(0)
        if cuda.cuDriverGetVersion(ctypes.byref(v)) == 0:
            return f"{v.value // 1000}.{(v.value % 1000) // 10}", "cuda driver API version"
    except (OSError, AttributeError):
        pass
    return None, "not found (no libnvidia-ml.so.1 or libcuda.so.1)"


def _nccl_version(torch):
    try:
        v = torch.cuda.nccl.version()
    except Exception:  # noqa: BLE001 (a build without NCCL raises anything from RuntimeError to AttributeError)
        return None
    if isinstance(v, tuple):
        return ".".join(str(x) for x in v)
    if isinstance(v, int):  # torch < 1.13 encodes it as MAJOR*1000 + MINOR*100 + PATCH (2.10.3 = 2103)
        return f"{v // 1000}.{(v % 1000) // 100}.{v % 100}"
    return str(v)


def _start_history(torch, max_entries):
    """Starts recording with stacks, on whichever signature this torch has: max_entries (torch >= 2.1,
    torch/cuda/memory.py _record_memory_history) or trace_alloc_max_entries (torch 2.0). Torch 1.13's
    (enabled, device) records no event trace: refused, since the snapshot would hold no device_traces."""
    record = torch.cuda.memory._record_memory_history
    params = inspect.signature(record).parameters
    if "max_entries" in params:
        record(enabled="all", context="all", stacks="python", max_entries=max_entries)
        return "max_entries"
    if "trace_alloc_max_entries" in params:
        record(True, record_context=True, trace_alloc_max_entries=max_entries, trace_alloc_record_context=True)
        return "trace_alloc_max_entries"
    raise CaptureError(f"torch {torch.__version__} records no allocator event trace "
                       "(torch.cuda.memory._record_memory_history takes no max_entries): use torch 2.0 or later")


def _stop_history(torch, api):
    record = torch.cuda.memory._record_memory_history
    if api == "max_entries":
        record(enabled=None)
    else:
        record(False)


def _dump(torch, path):
    dump = getattr(torch.cuda.memory, "_dump_snapshot", None)
    if dump is not None:
        dump(path)
        return
    with open(path, "wb") as f:  # torch 1.13: the same dict _dump_snapshot pickles
        pickle.dump(torch.cuda.memory._snapshot(), f)


def sidecar(torch, device, where, problem, snapshot_file, max_entries, started, ended):
    """Returns the sidecar document for `device` now (after torch.cuda.synchronize)."""
    props = torch.cuda.get_device_properties(device)
    free, total = torch.cuda.mem_get_info(device)
    reserved_now = int(torch.cuda.memory_reserved(device))
    max_reserved = int(torch.cuda.max_memory_reserved(device))
    used_now = int(total) - int(free)
    outside = used_now - reserved_now
    driver, driver_how = _driver_version()
    return {
        "schema": SCHEMA,
        "snapshot": os.path.basename(snapshot_file),
        "captured_utc": {"start": started, "end": ended},
        "software": {"python": sys.version.split()[0], "torch": str(torch.__version__),
                     "cuda_runtime": torch.version.cuda, "nccl": _nccl_version(torch)},
        "gpu": {"name": props.name, "total_memory": int(props.total_memory), "index": int(device),
                "driver": driver, "driver_from": driver_how},
        "allocator": {"PYTORCH_CUDA_ALLOC_CONF": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
                      "max_entries": int(max_entries)},
        "placement": where,
        "peaks": {"max_memory_reserved": max_reserved, "max_memory_allocated":
                  int(torch.cuda.max_memory_allocated(device))},
        "at_end": {"device_used": used_now, "device_total": int(total), "memory_reserved": reserved_now,
                   "outside_allocator": outside},
        "device_used_at_peak": {
            "bytes": max_reserved + outside,
            "how": "max_memory_reserved + (device used - memory_reserved) read by cudaMemGetInfo when the "
                   "capture ended: the memory outside the caching allocator (CUDA context, NCCL, other "
                   "processes on this GPU) taken as it was then"},
        "problem": problem,
    }


def _utc_now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class headroom_capture:  # noqa: N801 (used like a function: `with headroom_capture(...)`)
    """Records the allocator's history inside the `with` block; on leaving it (also through an exception,
    an out-of-memory error among them) dumps the snapshot and writes its sidecar. `paths` holds the two
    files' paths afterwards."""

    def __init__(self, out_dir, name="snapshot", problem_file=None, megatron_args=None,
                 max_entries=DEFAULT_MAX_ENTRIES, device=None, force=False, env=None):
        if not isinstance(out_dir, (str, os.PathLike)) or str(out_dir) == "":
            raise CaptureError("--out: give a directory")
        if not isinstance(name, str) or not name or "/" in name or name.startswith("."):
            raise CaptureError(f"--name '{name}': a file name without '/' and not starting with '.'")
        if isinstance(max_entries, bool) or not isinstance(max_entries, int) or not 1 <= max_entries <= 1 << 30:
            raise CaptureError(f"--max-entries {max_entries}: a whole number from 1 to {1 << 30}")
        if device is not None and (isinstance(device, bool) or not isinstance(device, int) or device < 0):
            raise CaptureError(f"--device {device}: a device index (0, 1, ...)")
        self.where = placement(env)
        self.problem = read_problem(problem_file, megatron_args)
        self.out_dir = str(out_dir)
        self.snapshot = os.path.join(self.out_dir, snapshot_name(name, self.where))
        self.paths = (self.snapshot, self.snapshot + SIDECAR_SUFFIX)
        if not force:
            for p in self.paths:
                if os.path.exists(p):
                    raise CaptureError(f"{p} exists (give --force to replace it)")
        if os.path.exists(self.out_dir) and not os.path.isdir(self.out_dir):
            raise CaptureError(f"--out {self.out_dir}: not a directory")
        self.max_entries, self.device = max_entries, device
        self._api = None
        self._torch = None
        self._started = None

    def __enter__(self):
        try:
            import torch
        except ImportError:
            raise CaptureError("torch is not installed", EXIT_NO_DEVICE) from None
        if not torch.cuda.is_available():
            raise CaptureError("no CUDA device (torch.cuda.is_available() is False)", EXIT_NO_DEVICE)
        os.makedirs(self.out_dir, exist_ok=True)
        self._torch = torch
        self._started = _utc_now()
        # Peaks from here on; on the device the script uses, which is unknown before it runs: all of them.
        for d in range(torch.cuda.device_count()):
            torch.cuda.reset_peak_memory_stats(d)
        self._api = _start_history(torch, self.max_entries)
        return self

    def __exit__(self, exc_type, exc, tb):
        torch = self._torch
        device = self.device if self.device is not None else torch.cuda.current_device()
        try:
            torch.cuda.synchronize(device)
        except RuntimeError:
            pass  # a failed kernel: the allocator's record is still worth keeping
        _dump(torch, self.snapshot)
        _stop_history(torch, self._api)
        doc = sidecar(torch, device, self.where, self.problem, self.snapshot, self.max_entries,
                      self._started, _utc_now())
        doc["ended_by"] = None if exc_type is None else f"{exc_type.__name__}: {str(exc)[:300]}"
        tmp = self.paths[1] + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(doc, f, indent=2)
            f.write("\n")
        os.replace(tmp, self.paths[1])
        return False  # never swallows the block's exception


def parse_args(argv):
    """Returns (options dict, command list). Raises CaptureError on bad arguments."""
    if "--" not in argv:
        raise CaptureError("give the training command after '--' (e.g. -- python3 train.py)")
    split = argv.index("--")
    mine, command = argv[:split], argv[split + 1:]
    opts = {"out": None, "name": "snapshot", "problem": None, "megatron_args": None,
            "max_entries": DEFAULT_MAX_ENTRIES, "device": None, "force": False}
    takes = {"--out": "out", "--name": "name", "--problem": "problem", "--megatron-args": "megatron_args",
             "--max-entries": "max_entries", "--device": "device"}
    i = 0
    while i < len(mine):
        arg = mine[i]
        key, _, inline = arg.partition("=")
        if arg == "--force":
            opts["force"] = True
        elif key in takes:
            if inline == "" and "=" not in arg:
                if i + 1 >= len(mine):
                    raise CaptureError(f"{key}: needs a value")
                i += 1
                inline = mine[i]
            opts[takes[key]] = inline
        else:
            raise CaptureError(f"unknown argument '{arg}' (see the usage at the top of {os.path.basename(__file__)})")
        i += 1
    if opts["out"] is None:
        raise CaptureError("--out: give a directory for the snapshot and its sidecar")
    for key in ("max_entries", "device"):
        if isinstance(opts[key], str):
            try:
                opts[key] = int(opts[key], 10)
            except ValueError:
                raise CaptureError(f"--{key.replace('_', '-')} '{opts[key]}': not a whole number") from None
    if command and os.path.basename(command[0]).startswith("python"):
        command = command[1:]  # `-- python3 train.py`: the script runs in this interpreter
    if not command:
        raise CaptureError("give the training script after '--'")
    if command[0] == "-m":
        if len(command) < 2:
            raise CaptureError("-m: give a module")
    elif not os.path.isfile(command[0]):
        raise CaptureError(f"training script '{command[0]}' not found")
    return opts, command


def run_command(command):
    """Runs the training command in this process, as `python3 COMMAND` would. Returns its exit status."""
    saved = sys.argv[:]
    try:
        if command[0] == "-m":
            sys.argv = [command[1]] + command[2:]
            runpy.run_module(command[1], run_name="__main__", alter_sys=True)
        else:
            sys.argv = command[:]
            sys.path.insert(0, os.path.dirname(os.path.abspath(command[0])))
            runpy.run_path(command[0], run_name="__main__")
    except SystemExit as e:
        if e.code is None:
            return 0
        if isinstance(e.code, int):
            return e.code
        print(e.code, file=sys.stderr)
        return 1
    finally:
        sys.argv = saved
    return 0


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    try:
        opts, command = parse_args(argv)
        capture = headroom_capture(opts["out"], name=opts["name"], problem_file=opts["problem"],
                                   megatron_args=opts["megatron_args"], max_entries=opts["max_entries"],
                                   device=opts["device"], force=opts["force"])
        with capture:
            status = run_command(command)
    except CaptureError as e:
        print(f"headroom_capture: {e}", file=sys.stderr)
        return e.status
    print(f"headroom_capture: wrote {capture.paths[0]} and {capture.paths[1]}", file=sys.stderr)
    return status


if __name__ == "__main__":
    sys.exit(main())
