#!/usr/bin/env python3
"""capture_test.py: tools/headroom_capture.py on the CPU, against a fake CUDA module.

Debian's python3-torch (CPU only) provides torch; its torch.cuda functions are replaced by a fake GPU whose
figures are chosen here, so the sidecar's fields are checked against numbers derived independently of the
script. The fake's snapshot is a copy of a real one (tests/data/snapshots/), so that, given the built
headroom (argv[1]), `headroom snapshot` reads the capture and its sidecar end to end. Never skips: a
missing torch is a failure (CI installs python3-torch, .ci/install-deps).

  python3 tests/capture_test.py [HEADROOM_BINARY]
"""
import contextlib
import inspect
import io
import json
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import types
import unittest
from unittest import mock

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "tools", "headroom_capture.py")
REAL_SNAPSHOT = os.path.join(HERE, "data", "snapshots", "NiuHuangxiaozi__forward_memory_snapshot_100.pickle")
HEADROOM = None  # the built binary, from argv[1]

sys.path.insert(0, os.path.join(HERE, "..", "tools"))
import headroom_capture as hc  # noqa: E402

import torch  # noqa: E402  (a failure, not a skip, when missing)

MIB = 1 << 20
# The fake GPU: 80 GiB, 5000 MiB used at the end of which 4200 MiB reserved by the allocator.
TOTAL = 80 * 1024 * MIB
USED_AT_END = 5000 * MIB
RESERVED_AT_END = 4200 * MIB
MAX_RESERVED = 6144 * MIB
MAX_ALLOCATED = 5900 * MIB


class FakeCuda:
    """Patches torch.cuda with a GPU of the figures above; records the history calls."""

    def __init__(self, new_api=True):
        self.history = []
        self.new_api = new_api

    def record_new(self, enabled="all", context="all", stacks="all", max_entries=sys.maxsize, device=None):
        self.history.append(("new", enabled, stacks, max_entries))

    def record_old(self, enabled, record_context=True, trace_alloc_max_entries=1,
                   trace_alloc_record_context=False, device=None, record_context_cpp=False):
        self.history.append(("old", enabled, trace_alloc_record_context, trace_alloc_max_entries))

    def patches(self):
        props = types.SimpleNamespace(name="NVIDIA Fake 80GB", total_memory=TOTAL)
        record = self.record_new if self.new_api else self.record_old
        return [
            mock.patch.object(torch.cuda, "is_available", lambda: True),
            mock.patch.object(torch.cuda, "device_count", lambda: 2),
            mock.patch.object(torch.cuda, "current_device", lambda: 1),
            mock.patch.object(torch.cuda, "synchronize", lambda device=None: None),
            mock.patch.object(torch.cuda, "reset_peak_memory_stats", lambda device=None: None),
            mock.patch.object(torch.cuda, "get_device_properties", lambda device: props),
            mock.patch.object(torch.cuda, "mem_get_info", lambda device=None: (TOTAL - USED_AT_END, TOTAL)),
            mock.patch.object(torch.cuda, "memory_reserved", lambda device=None: RESERVED_AT_END),
            mock.patch.object(torch.cuda, "max_memory_reserved", lambda device=None: MAX_RESERVED),
            mock.patch.object(torch.cuda, "max_memory_allocated", lambda device=None: MAX_ALLOCATED),
            mock.patch.object(torch.cuda.memory, "_record_memory_history", record),
            mock.patch.object(torch.cuda.memory, "_dump_snapshot",
                              lambda path: shutil.copyfile(REAL_SNAPSHOT, path), create=True),
            mock.patch.object(torch.version, "cuda", "12.4"),
        ]

    def __enter__(self):
        self._stack = contextlib.ExitStack()
        for p in self.patches():
            self._stack.enter_context(p)
        return self

    def __exit__(self, *exc):
        self._stack.close()
        return False


def clean_env(**extra):
    """os.environ without any launcher's variables, plus `extra`."""
    env = {k: v for k, v in os.environ.items()
           if not any(k == var for entry in hc.LAUNCHERS for var in entry[1:] if var)}
    env.update(extra)
    return env


class Placement(unittest.TestCase):
    def test_single_process(self):
        self.assertEqual(hc.placement({})["world_size"], 1)
        self.assertIsNone(hc.placement({})["launcher"])
        self.assertEqual(hc.snapshot_name("s", hc.placement({})), "s.pickle")

    def test_launchers(self):
        w = hc.placement({"RANK": "3", "LOCAL_RANK": "1", "WORLD_SIZE": "8"})
        self.assertEqual((w["launcher"], w["rank"], w["local_rank"], w["world_size"]), ("torchrun", 3, 1, 8))
        self.assertEqual(hc.snapshot_name("s", w), "s.rank3.pickle")
        w = hc.placement({"OMPI_COMM_WORLD_RANK": "5", "OMPI_COMM_WORLD_SIZE": "16",
                          "OMPI_COMM_WORLD_LOCAL_RANK": "5"})
        self.assertEqual((w["launcher"], w["rank"], w["world_size"]), ("openmpi", 5, 16))
        # Slurm counts only inside a step (probes/ranks/launch.cpp): a batch script's SLURM_PROCID is not a rank.
        self.assertIsNone(hc.placement({"SLURM_PROCID": "2", "SLURM_NTASKS": "4"})["launcher"])
        w = hc.placement({"SLURM_PROCID": "2", "SLURM_STEP_NUM_TASKS": "4", "SLURM_STEP_ID": "0"})
        self.assertEqual((w["launcher"], w["rank"], w["world_size"]), ("slurm", 2, 4))
        w = hc.placement({"PMI_RANK": "0", "PMI_SIZE": "2"})
        self.assertEqual((w["launcher"], w["rank"], w["world_size"]), ("pmi", 0, 2))
        self.assertEqual(hc.snapshot_name("s", w), "s.rank0.pickle")

    def test_malformed(self):
        for env, words in [({"RANK": "x"}, "RANK='x'"), ({"RANK": "-1"}, "RANK=-1"),
                           ({"RANK": "4", "WORLD_SIZE": "4"}, "not below WORLD_SIZE=4"),
                           ({"RANK": "0", "WORLD_SIZE": "99999999999"}, "out of range")]:
            with self.assertRaises(hc.CaptureError) as c:
                hc.placement(env)
            self.assertIn(words, str(c.exception))
            self.assertEqual(c.exception.status, 2)


class Arguments(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.train = os.path.join(self.dir, "train.py")
        with open(self.train, "w") as f:
            f.write("pass\n")

    def tearDown(self):
        shutil.rmtree(self.dir)

    def refused(self, argv, words):
        with self.assertRaises(hc.CaptureError) as c:
            opts, _ = hc.parse_args(argv)
            hc.headroom_capture(opts["out"], name=opts["name"], problem_file=opts["problem"],
                                megatron_args=opts["megatron_args"], max_entries=opts["max_entries"],
                                device=opts["device"], force=opts["force"], env={})
        self.assertIn(words, str(c.exception))

    def test_parsed(self):
        opts, cmd = hc.parse_args(["--out", "d", "--max-entries=50", "--", "python3", self.train, "--lr", "1"])
        self.assertEqual((opts["out"], opts["max_entries"], cmd), ("d", 50, [self.train, "--lr", "1"]))
        opts, cmd = hc.parse_args(["--out=d", "--device", "1", "--", "-m", "pkg.train", "-x"])
        self.assertEqual((opts["device"], cmd), (1, ["-m", "pkg.train", "-x"]))

    def test_refused(self):
        out = os.path.join(self.dir, "o")
        self.refused(["--out", out, self.train], "after '--'")
        self.refused(["--", self.train], "--out")
        self.refused(["--out", out, "--"], "training script")
        self.refused(["--out", out, "--", "python3"], "training script")
        self.refused(["--out", out, "--", "nope.py"], "'nope.py' not found")
        self.refused(["--out", out, "--", "-m"], "-m: give a module")
        self.refused(["--out", out, "--bogus", "--", self.train], "unknown argument '--bogus'")
        self.refused(["--out", out, "--max-entries", "ten", "--", self.train], "--max-entries 'ten'")
        self.refused(["--out", out, "--max-entries", "0", "--", self.train], "--max-entries 0")
        self.refused(["--out", out, "--device", "-2", "--", self.train], "--device -2")
        self.refused(["--out", out, "--name", "a/b", "--", self.train], "--name 'a/b'")
        self.refused(["--out", out, "--name", "--", self.train], "--name: needs a value")
        self.refused(["--out", self.train, "--", self.train], "not a directory")
        self.refused(["--out", out, "--problem", self.train, "--megatron-args", "--tp 2", "--", self.train],
                     "not both")
        self.refused(["--out", out, "--problem", os.path.join(self.dir, "none.json"), "--", self.train],
                     "cannot read")
        bad = os.path.join(self.dir, "bad.json")
        with open(bad, "wb") as f:
            f.write(b"{\xff\xfe}")
        self.refused(["--out", out, "--problem", bad, "--", self.train], "not UTF-8")
        with open(bad, "wb") as f:
            f.write(b"  \n")
        self.refused(["--out", out, "--problem", bad, "--", self.train], "empty")

    def test_command_line_exit_2_one_line(self):
        for argv in (["--out", self.dir], ["--out", self.dir, "--max-entries", "-5", "--", self.train]):
            p = subprocess.run([sys.executable, SCRIPT] + argv, capture_output=True, text=True,
                               env=clean_env())
            self.assertEqual(p.returncode, 2, p.stderr)
            self.assertEqual(len(p.stderr.strip().splitlines()), 1, p.stderr)
            self.assertTrue(p.stderr.startswith("headroom_capture: "), p.stderr)
            self.assertEqual(p.stdout, "")

    def test_no_cuda_exit_4(self):
        # Debian's torch is built without CUDA: the real torch.cuda says there is no device.
        p = subprocess.run([sys.executable, SCRIPT, "--out", os.path.join(self.dir, "o"), "--", self.train],
                           capture_output=True, text=True, env=clean_env())
        self.assertEqual(p.returncode, 4, p.stderr)
        self.assertIn("no CUDA device", p.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.dir, "o", "snapshot.pickle")))


class Capture(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.train = os.path.join(self.dir, "train.py")
        with open(self.train, "w") as f:
            f.write("import sys\nimport torch\nSEEN = torch.cuda.is_available()\n"
                    "open(sys.argv[1], 'w').write(' '.join(sys.argv[1:]) + ' ' + __name__)\n"
                    "if len(sys.argv) > 2: sys.exit(int(sys.argv[2]))\n")
        self.problem = os.path.join(self.dir, "problem.json")
        with open(self.problem, "w") as f:
            f.write('{"preset": "llama3-8b", "gpus": 8}\n')

    def tearDown(self):
        shutil.rmtree(self.dir)

    def run_main(self, argv, env=None, new_api=True):
        fake = FakeCuda(new_api)
        err = io.StringIO()
        with fake, mock.patch.dict(os.environ, env or clean_env(), clear=True), \
                contextlib.redirect_stderr(err):
            status = hc.main(argv)
        return status, fake, err.getvalue()

    def test_sidecar_fields(self):
        out = os.path.join(self.dir, "cap")
        marker = os.path.join(self.dir, "ran.txt")
        status, fake, err = self.run_main(["--out", out, "--problem", self.problem, "--max-entries", "1234",
                                           "--", "python3", self.train, marker],
                                          env=clean_env(PYTORCH_CUDA_ALLOC_CONF="expandable_segments:True"))
        self.assertEqual(status, 0, err)
        # The script ran in this process as __main__ with its own argv.
        with open(marker) as f:
            self.assertEqual(f.read(), marker + " __main__")
        self.assertEqual(fake.history, [("new", "all", "python", 1234), ("new", None, "all", sys.maxsize)])
        snap = os.path.join(out, "snapshot.pickle")
        with open(snap, "rb") as f, open(REAL_SNAPSHOT, "rb") as g:
            self.assertEqual(pickle.load(f), pickle.load(g))
        with open(snap + ".headroom.json") as f:
            doc = json.load(f)
        self.assertEqual(doc["schema"], "headroom.capture/1")
        self.assertEqual(doc["snapshot"], "snapshot.pickle")
        self.assertEqual(doc["gpu"]["name"], "NVIDIA Fake 80GB")
        self.assertEqual(doc["gpu"]["total_memory"], 85899345920)  # 80 GiB
        self.assertEqual(doc["gpu"]["index"], 1)  # the current device when the capture ended
        self.assertEqual(doc["software"]["torch"], torch.__version__)
        self.assertEqual(doc["software"]["cuda_runtime"], "12.4")
        self.assertEqual(doc["allocator"]["PYTORCH_CUDA_ALLOC_CONF"], "expandable_segments:True")
        self.assertEqual(doc["peaks"], {"max_memory_reserved": 6442450944, "max_memory_allocated": 6186598400})
        # 6144 MiB reserved at the peak + (5000 - 4200) MiB outside the allocator at the end = 6944 MiB.
        self.assertEqual(doc["device_used_at_peak"]["bytes"], 6944 * MIB)
        self.assertEqual(doc["at_end"]["outside_allocator"], 800 * MIB)
        self.assertIn("cudaMemGetInfo", doc["device_used_at_peak"]["how"])
        self.assertEqual(doc["placement"]["world_size"], 1)
        self.assertEqual(doc["problem"]["kind"], "file")
        self.assertEqual(json.loads(doc["problem"]["text"]), {"preset": "llama3-8b", "gpus": 8})
        self.assertIsNone(doc["ended_by"])
        for key in ("start", "end"):
            self.assertRegex(doc["captured_utc"][key], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
        for key in ("driver", "driver_from"):
            self.assertIn(key, doc["gpu"])
        self.assertTrue(doc["software"]["nccl"] is None or isinstance(doc["software"]["nccl"], str))
        # Written again: refused without --force, replaced with it.
        status, _, err = self.run_main(["--out", out, "--", self.train, marker])
        self.assertEqual(status, 2)
        self.assertIn("exists", err)
        status, _, err = self.run_main(["--out", out, "--force", "--megatron-args", "--tp 2 --pp 4", "--",
                                        self.train, marker])
        self.assertEqual(status, 0, err)
        with open(snap + ".headroom.json") as f:
            self.assertEqual(json.load(f)["problem"], {"kind": "megatron_args", "text": "--tp 2 --pp 4"})

    def test_per_rank_names_and_exit_status(self):
        out = os.path.join(self.dir, "cap")
        marker = os.path.join(self.dir, "ran.txt")
        env = clean_env(RANK="3", LOCAL_RANK="1", WORLD_SIZE="4")
        status, _, err = self.run_main(["--out", out, "--name", "step", "--", self.train, marker, "7"], env=env)
        self.assertEqual(status, 7, err)  # the training script's own exit status
        self.assertEqual(sorted(os.listdir(out)), ["step.rank3.pickle", "step.rank3.pickle.headroom.json"])
        with open(os.path.join(out, "step.rank3.pickle.headroom.json")) as f:
            doc = json.load(f)
        self.assertEqual({k: doc["placement"][k] for k in ("launcher", "rank", "local_rank", "world_size")},
                         {"launcher": "torchrun", "rank": 3, "local_rank": 1, "world_size": 4})
        status, _, err = self.run_main(["--out", out, "--", self.train, marker], env=clean_env(RANK="two"))
        self.assertEqual((status, err.count("\n")), (2, 1))
        self.assertIn("RANK='two'", err)

    def test_old_torch_api_and_exception(self):
        out = os.path.join(self.dir, "cap")
        fake = FakeCuda(new_api=False)
        with fake, self.assertRaises(ZeroDivisionError):
            with hc.headroom_capture(out, max_entries=77, device=0, env={}) as cap:
                _ = 1 / 0
        self.assertEqual(fake.history, [("old", True, True, 77), ("old", False, False, 1)])
        with open(cap.paths[1]) as f:
            doc = json.load(f)
        self.assertTrue(doc["ended_by"].startswith("ZeroDivisionError"))
        self.assertEqual(doc["gpu"]["index"], 0)

    def test_history_signatures_match_torch(self):
        # This torch's function has one of the three known signatures; the fakes take its parameters.
        real = set(inspect.signature(torch.cuda.memory._record_memory_history).parameters)
        fake = FakeCuda()
        if "max_entries" in real:
            self.assertTrue({"enabled", "context", "stacks", "max_entries"} <= real, sorted(real))
        elif "trace_alloc_max_entries" in real:
            self.assertTrue(set(inspect.signature(fake.record_old).parameters) <= real, sorted(real))
        else:
            self.assertEqual(real, {"enabled", "device"})  # torch 1.13 (Debian bookworm's python3-torch)

    def test_torch_without_a_trace_is_refused(self):
        # torch 1.13's _record_memory_history(enabled, device) records no event trace.
        def record_113(enabled, device=None):
            raise AssertionError("must not be called")
        with FakeCuda(), mock.patch.object(torch.cuda.memory, "_record_memory_history", record_113):
            with self.assertRaises(hc.CaptureError) as c:
                with hc.headroom_capture(os.path.join(self.dir, "cap"), env={}):
                    pass
        self.assertIn("use torch 2.0 or later", str(c.exception))
        self.assertFalse(os.path.exists(os.path.join(self.dir, "cap", "snapshot.pickle")))

    def test_headroom_reads_the_capture(self):
        if HEADROOM is None:
            self.fail("give the built headroom as argv[1] (ctest does)")
        out = os.path.join(self.dir, "cap")
        status, _, err = self.run_main(["--out", out, "--", self.train, os.path.join(self.dir, "m")])
        self.assertEqual(status, 0, err)
        snap = os.path.join(out, "snapshot.pickle")
        p = subprocess.run([HEADROOM, "snapshot", snap, "--json", "-"], capture_output=True, text=True)
        self.assertEqual(p.returncode, 0, p.stderr)
        rec = json.loads(p.stdout)
        self.assertEqual(rec["environment"]["gpu"], "NVIDIA Fake 80GB")
        self.assertEqual(rec["environment"]["cuda_runtime"], "12.4")
        self.assertEqual(rec["capture"]["peaks"]["max_memory_reserved"], MAX_RESERVED)
        p = subprocess.run([HEADROOM, "probe", "snapshot", snap, "--json", "-"], capture_output=True, text=True)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(json.loads(p.stdout)["capacity"], {"bytes": TOTAL, "from": "capture sidecar"})


if __name__ == "__main__":
    if len(sys.argv) > 1 and not sys.argv[1].startswith("-"):
        HEADROOM = sys.argv.pop(1)
    unittest.main(verbosity=1)
