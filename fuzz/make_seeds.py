#!/usr/bin/env python3
# make_seeds.py: writes the seed files of fuzz/corpus/ that are generated rather than hand-written: the
# launcher, printable and outputs targets' seeds, the snapshot target's hostile snapshots (pickles that
# repeat one event list, segments or a wide dict through the memo; blocks larger than their segment; segment
# events that contradict each other) and the calibration and measurement files with hostile strings.
# Deterministic: rerunning it rewrites the same bytes. Usage: fuzz/make_seeds.py (from anywhere).
import copy
import json
import os
import pickle

CORPUS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def write(folder, name, data):
    """Writes `data` (bytes or str) to corpus/folder/name."""
    os.makedirs(os.path.join(CORPUS, folder), exist_ok=True)
    with open(os.path.join(CORPUS, folder, name), "wb") as f:
        f.write(data.encode() if isinstance(data, str) else data)


def launcher():
    """Environments of the three launchers: consistent, inconsistent, half set, and none."""
    o = "OMPI_COMM_WORLD_"
    seeds = {
        "ompi-ok": f"{o}RANK=1\n{o}SIZE=4\n{o}LOCAL_RANK=1\n{o}LOCAL_SIZE=2\n@world=1,4\n",
        "ompi-rank-negative": f"{o}RANK=-1\n{o}SIZE=2\n",
        "ompi-size-huge": f"{o}RANK=0\n{o}SIZE=99999999999\n",
        "ompi-rank-empty": f"{o}RANK=\n{o}SIZE=2\n",
        "ompi-rank-space": f"{o}RANK= 1\n{o}SIZE=2\n",
        "ompi-rank-only": f"{o}RANK=0\n",
        "ompi-size-only": f"{o}SIZE=2\n",
        "ompi-rank-ge-size": f"{o}RANK=2\n{o}SIZE=2\n@world=2,2\n",
        "ompi-size-zero": f"{o}RANK=0\n{o}SIZE=0\n",
        "ompi-local-outside": f"{o}RANK=0\n{o}SIZE=4\n{o}LOCAL_RANK=2\n{o}LOCAL_SIZE=2\n",
        "ompi-local-size-over-world": f"{o}RANK=0\n{o}SIZE=2\n{o}LOCAL_SIZE=3\n",
        "ompi-nul-in-value": f"{o}RANK=1\0garbage\n{o}SIZE=2\n",
        "ompi-plus-sign": f"{o}RANK=+1\n{o}SIZE=2\n",
        "slurm-step": "SLURM_PROCID=3\nSLURM_STEP_NUM_TASKS=8\nSLURM_LOCALID=1\nSLURM_STEP_ID=0\n"
                      "SLURM_NTASKS=8\n@world=3,8\n",
        "slurm-batch-no-step": "SLURM_PROCID=0\nSLURM_NTASKS=2\nSLURM_LOCALID=0\n@world=0,1\n",
        "slurm-rank-ge-size": "SLURM_PROCID=8\nSLURM_STEP_NUM_TASKS=8\nSLURM_STEP_ID=1\n",
        "slurm-step-only": "SLURM_STEP_ID=0\nSLURM_NTASKS=4\n",
        "pmi-world-mismatch": "PMI_RANK=1\nPMI_SIZE=2\nMPI_LOCALRANKID=0\nMPI_LOCALNRANKS=2\n@world=0,2\n",
        "pmi-localnranks-zero": "PMI_RANK=0\nPMI_SIZE=2\nMPI_LOCALNRANKS=0\n",
        "ompi-before-bad-slurm": f"{o}RANK=0\n{o}SIZE=1\nSLURM_PROCID=-1\nSLURM_STEP_NUM_TASKS=x\n"
                                 "SLURM_STEP_ID=0\n@world=0,1\n",
        "none": "PATH=/usr/bin\nHOME=/root\n@world=0,2\n",
    }
    for name, text in seeds.items():
        write("launcher", name, text)


def printable():
    """Strings with controls, escapes, bad UTF-8 and long names; the first two bytes are the limit."""
    def seed(n, s):
        return bytes([n >> 8, n & 0xFF]) + (s.encode("utf-8", "surrogatepass") if isinstance(s, str) else s)

    seeds = {
        "ansi-colour": seed(200, "model\x1b[31mred\x1b[0m\nnext line\r\t"),
        "nul-and-del": seed(20, "a\0b\x7fc"),
        "bidi-override": seed(200, "invoice\u202egnp.exe and \u2066isolate\u2069"),
        "c1-controls": seed(200, "x\u0085y\u009bz\u2028w"),
        "invalid-utf8": seed(30, b"\xff\xfe\xc0\xaf\xed\xa0\x80\xf4\x90\x80\x80\xe2\x82"),
        "multibyte-cut": seed(10, "\u00e9" * 300 + "\U0001f600" * 10),
        "script-long-name": seed(200, "<script>alert(1)</script>" + "n" * 5000 + ".json"),
        "limit-zero": seed(0, "abcdefgh\x1b"),
        "exactly-limit": seed(400, "q" * 400),
        "dots-at-the-cut": seed(7, "...\x1b...\x1b..."),
        "escape-at-the-cut": seed(12, "\x1b" * 3 + "\u202e" * 3 + "\x01" * 3),
    }
    for name, data in seeds.items():
        write("printable", name, data)


def outputs():
    """Two spellings each (flags, count-1, components...; see outputs_target.cpp for the components)."""
    dot, up, empty, a, b, c, d, h, s, l, x, w = range(12)

    def seed(flags, first, second):
        return bytes([flags, len(first) - 1, *first, len(second) - 1, *second])

    seeds = {
        "dot-slash-same": seed(1, [a], [dot, a]),
        "hard-link-same": seed(1, [a], [h]),
        "symlink-refused": seed(1, [a], [s]),
        "symlinked-dir-same": seed(1, [l, c], [d, c]),
        "two-new-files": seed(0, [b], [d, b]),
        "dot-dot-same": seed(0, [b], [d, up, b]),
        "double-slash-same": seed(0, [empty, b], [b]),
        "climbing-same": seed(0, [up, up, b], [up, x, up, up, b]),
        "trailing-slash": seed(0, [b, empty], [b]),
        "file-as-dir": seed(1, [a, dot], [a]),
        "exists-no-force": seed(0, [a], [b]),
        "writer-throws": seed(3, [a], [b]),
        "second-writer-throws-big": seed(1 | 4 | 8, [a], [l, b]),
        "new-through-symlinked-dir": seed(0, [l, b], [w, up, x, b]),
    }
    for name, data in seeds.items():
        write("outputs", name, data)


def snapshots():
    """Pickles that expand through the memo, and snapshots that contradict themselves."""
    ev = {"action": "alloc", "addr": 1, "size": 512, "stream": 0}
    events = [ev] * 300
    blk = {"address": 4096, "size": 512, "requested_size": 512, "state": "inactive"}
    seg = {"device": 0, "address": 4096, "total_size": 512, "stream": 0, "blocks": [blk] * 100}
    wide = {"k%d" % i: i for i in range(300)}
    wide.update(ev)
    narrow = {"k%d" % i: i for i in range(200)}
    narrow.update(ev)
    docs = {
        "repeat-event-list": {"segments": [], "device_traces": [events] * 20},
        "repeat-segments": {"segments": [seg] * 100, "device_traces": [[]]},
        "wide-event-dict": {"segments": [], "device_traces": [[wide] * 10]},
        "many-fields": {"segments": [], "device_traces": [[narrow] * 400]},
        "repeat-within-limit": {"segments": [], "device_traces": [[ev] * 50, [ev] * 50]},
    }
    for name, doc in docs.items():
        for protocol in (2, 4):
            write("snapshot", f"{name}_p{protocol}.pickle", pickle.dumps(doc, protocol=protocol))
    m, base = 1 << 20, 0x200000000000
    settings = {"PYTORCH_CUDA_ALLOC_CONF": "", "max_split_size": -1, "expandable_segments": False}

    def event(action, addr, size):
        return {"action": action, "addr": addr, "size": size, "stream": 0}

    fat = {"segments": [{"device": 0, "address": base, "total_size": 20 * m,
                         "blocks": [{"address": base, "size": 40 * m, "requested_size": 40 * m,
                                     "state": "active_allocated"}]}],
           "device_traces": [[event("segment_alloc", base, 20 * m), event("alloc", base, 40 * m)]],
           "allocator_settings": settings}
    maps = {"segments": [],
            "device_traces": [[event("segment_map", base, 40 * m), event("alloc", base, 4 * m),
                               event("free_requested", base, 4 * m), event("free_completed", base, 4 * m),
                               event("segment_unmap", base, 20 * m)]],
            "allocator_settings": settings}
    twice = copy.deepcopy(maps)
    twice["device_traces"][0][4]["size"] = 40 * m
    twice["device_traces"][0].append(event("segment_unmap", base, 20 * m))
    for name, doc in {"blocks-larger-than-segment": fat, "map-unmap-sizes-differ": maps,
                      "unmapped-twice": twice}.items():
        write("snapshot", name + ".json", json.dumps(doc))
        write("snapshot", name + "_p4.pickle", pickle.dumps(doc, protocol=4))


HOSTILE = ["NVIDIA\x1b[2J\x1b[31mH200\x1b[0m", "H200\0hidden", "H200\nfits: yes", "<script>alert(1)</script>",
           "\u202eH200", "n" * 5000]


def records():
    """The calibration and the measurement record with hostile strings where names and GPUs go."""
    with open(os.path.join(CORPUS, "json", "calibration_h200_example.json")) as f:
        cal = json.load(f)
    with open(os.path.join(CORPUS, "json", "record.json")) as f:
        rec = json.load(f)
    for i, s in enumerate(HOSTILE):
        c = copy.deepcopy(cal)
        c["holds_for"]["gpu"] = s
        c["holds_for"]["driver"] = s
        c["records"] = [{"origin": s, "kind": s, "backend": "sim", "inputs": {"fixed": 1, "tokens": 2}}]
        c["worst_residual"] = {"bytes": 0, "record": s}
        write("json", f"calibration_hostile_{i}.json", json.dumps(c))
        r = copy.deepcopy(rec)
        r["inputs"]["model"]["name"] = s
        r["environment"]["gpu"] = s
        r["environment"]["host"] = s
        write("json", f"record_hostile_{i}.json", json.dumps(r))


if __name__ == "__main__":
    launcher()
    printable()
    outputs()
    snapshots()
    records()
