#!/usr/bin/env python3
# make_seeds.py: writes the seed files of fuzz/corpus/ that are generated rather than hand-written: the
# launcher, printable and outputs targets' seeds, the snapshot target's hostile snapshots (pickles that
# repeat one event list, segments or a wide dict through the memo; blocks larger than their segment; segment
# events that contradict each other), the calibration and measurement files with hostile strings, and the
# launch importers' hostile inputs (megatron_args, deepspeed_config, torchtitan_config: small hand-made ones
# and the real files of tests/data/{megatron,deepspeed,torchtitan} cut short or with a value made hostile).
# Deterministic: rerunning it rewrites the same bytes. Usage: fuzz/make_seeds.py (from anywhere).
import copy
import json
import os
import pickle

CORPUS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")
TEST_DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data")


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


def real(folder, name):
    """The text of the real file tests/data/folder/name."""
    with open(os.path.join(TEST_DATA, folder, name), encoding="utf-8") as f:
        return f.read()


def megatron_args():
    """Launch scripts, argument strings and ModelZoo YAML that are malformed, huge or self-expanding."""
    gpt = "python pretrain_gpt.py --num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 128 " \
          "--max-position-embeddings 128 --micro-batch-size 1 --vocab-size 1000"
    seeds = {
        "args-ok": gpt + "\n",
        "args-huge-numbers": "--num-layers 99999999999999999999 --hidden-size 2147483648 "
                             "--num-attention-heads 0 --seq-length 1 --vocab-size 1\n",
        "args-overflowing-shape": "--num-layers 1000000 --hidden-size 16777216 --ffn-hidden-size "
                                  "9223372036854775807 --num-attention-heads 1 --vocab-size 100000000 "
                                  "--seq-length 1073741824 --micro-batch-size 1000000\n",
        "args-flag-without-value": gpt + " --tensor-model-parallel-size\n",
        "args-equals-forms": gpt + " --tensor-model-parallel-size= --pipeline-model-parallel-size=-1 --=3\n",
        "args-nan-capacity": gpt + " --num-experts 8 --moe-router-topk 9 --moe-expert-capacity-factor nan\n",
        "args-moe-layer-freq": gpt + " --num-experts 8 --moe-layer-freq '([1]*99999999)' --moe-ffn-hidden-size 0\n",
        "args-pp-layout-huge": gpt + " --pipeline-model-parallel-size 2 --pipeline-model-parallel-layout "
                                     "'Et*9223372036854775807|L'\n",
        "args-pp-layout-repeat": gpt + " --pipeline-model-parallel-size 2 --pipeline-model-parallel-layout "
                                       "'E|(t|)*99999999L'\n",
        "args-cp-seq": gpt + " --context-parallel-size 1000000 --seq-length 1073741823\n",
        "script-unterminated-quote": "ARGS=(--num-layers 2 \"--hidden-size\n",
        "script-unterminated-brace": "X=${A:-${B\npython pretrain_gpt.py $X\n",
        "script-heredoc": "cat <<EOF\n--num-layers 2\n" + gpt + "\n",
        "script-if-unclosed": "if [ \"$A\" = 1 ]; then\nif [[ -n $B ]]; then\n" + gpt + "\n",
        "script-arith-edges": "A=$((9223372036854775807+1))\nB=$((-9223372036854775807-1))\nC=$(($B/-1))\n"
                              "D=$((1/0))\nE=$((1%0))\nF=$((" + "(" * 40 + "1" + ")" * 40 + "))\n"
                              "G=$((" + "-" * 40 + "1))\n" + gpt + " --num-layers $A $B $C $D $E $F $G\n",
        "script-nested-defaults": "X=" + "${A:-" * 40 + "1" + "}" * 40 + "\n" + gpt + " --tensor-model-parallel-size $X\n",
        "script-command-in-variable": "CMD=\"torchrun --nproc_per_node 8 pretrain_gpt.py $CMD --num-layers $(nproc)\"\n"
                                      "bash -c \"$CMD\"\n",
        "script-function-and-loop": "f() { echo; }\nfor i in 1 2; do X+=( --num-layers ); done\ncase a in a) ;; esac\n"
                                    + gpt + " \"${X[@]}\"\n",
        "script-controls": "python pretrain_gpt.py --num-layers 2\x1b[31m --hidden-size \xff\xfe\0 --x\u202e\n",
        "yaml-deep-flow": "--num-layers: " + "[" * 3000 + "]" * 3000 + "\n",
        "yaml-aliases": "ENV_VARS: &e\n  TP: ${TP}\nMODEL_ARGS:\n  --tensor-model-parallel-size: &a ${TP}\n"
                        "  --pipeline-model-parallel-size: *a\n  --num-layers: [*a, *a]\n  --seq-length: *e\n",
        "yaml-non-scalar-key": "? [a, b]\n: 1\n--num-layers: 2\n",
        "yaml-not-a-map": "MODEL_ARGS:\n- --num-layers\n- 2\n",
        "yaml-tab-and-junk": "--num-layers: 2\n\t--hidden-size: : : {\n",
        "yaml-false-true-null": "--num-layers: 2\n--sequence-parallel: true\n--use-flash-attn: false\n"
                                "--hidden-size: ~\n--vocab-size: 1e400\n",
    }
    # The real files cut in the middle (an unterminated construct, a half line), and with a value made huge.
    for name in ("train_mixtral_8x7b_distributed.sh", "DeepSeek-V3.yaml", "sbatch_mfsdp_deepseek_v3.sh"):
        text = real("megatron", name)
        base = os.path.splitext(name)[0]
        seeds[f"{base}-cut"] = text[: len(text) // 2]
        seeds[f"{base}-huge-layers"] = text.replace("--num-layers", "--num-layers 9223372036854775807 --x", 1)
    for name, text in seeds.items():
        write("megatron_args", name, text.encode("utf-8", "surrogateescape") if isinstance(text, str) else text)


def deepspeed_config():
    """DeepSpeed configs with values of the wrong type, out of range, contradicting, or "auto"."""
    def doc(**kw):
        return json.dumps(kw)

    big = 1 << 62
    seeds = {
        "stage-99": doc(train_batch_size=8, zero_optimization={"stage": 99}),
        "stage-negative": doc(train_batch_size=8, zero_optimization={"stage": -1}),
        "stage-string": doc(train_batch_size=8, zero_optimization={"stage": "3"}),
        "stage-fraction": doc(train_batch_size=8, zero_optimization={"stage": 2.5}),
        "legacy-true": doc(train_batch_size=8, zero_optimization=True, allgather_size=1e300),
        "buckets-auto": doc(train_micro_batch_size_per_gpu=1, zero_optimization={
            "stage": 3, "reduce_bucket_size": "auto", "stage3_prefetch_bucket_size": "auto",
            "stage3_param_persistence_threshold": "auto", "stage3_max_live_parameters": 1e20}),
        "buckets-huge": doc(train_micro_batch_size_per_gpu=1, zero_optimization={
            "stage": 2, "reduce_bucket_size": big, "allgather_bucket_size": -1, "contiguous_gradients": "yes"}),
        "batch-overflow": doc(train_batch_size=big, train_micro_batch_size_per_gpu=1 << 40,
                              gradient_accumulation_steps=1 << 40),
        "batch-not-multiple": doc(train_batch_size=7, train_micro_batch_size_per_gpu=2),
        "all-auto": doc(train_batch_size="auto", train_micro_batch_size_per_gpu="auto",
                        gradient_accumulation_steps="auto", bf16={"enabled": "auto"}, fp16={"enabled": "auto"},
                        zero_optimization={"stage": "auto", "offload_optimizer": {"device": "auto"}}),
        "bf16-and-fp16": doc(train_batch_size=8, bf16={"enabled": True}, fp16={"enabled": True}),
        "wrong-kinds": doc(train_batch_size=[8], optimizer=["adam"], data_types="fp32",
                           activation_checkpointing=1, zero_optimization={"offload_param": "cpu"}),
        "offload-nvme-stage2": doc(train_micro_batch_size_per_gpu=1, zero_optimization={
            "stage": 2, "offload_param": {"device": "nvme"}, "offload_optimizer": {"device": "disk"},
            "cpu_offload": True, "cpu_offload_param": True}),
        "aliases-twice": doc(train_micro_batch_size_per_gpu=1, zero_optimization={
            "stage": 3, "stage3_max_live_parameters": 1, "max_live_parameters": 2}),
        "bf16-fp32-accum": doc(train_micro_batch_size_per_gpu=1, bf16={"enabled": True},
                               data_types={"grad_accum_dtype": "fp32", "param_dtype": 3},
                               communication_data_type="fp8"),
        "hostile-keys": doc(**{"\x1b[31mzero\x1b[0m": 1, "k" * 5000: 2, "\u202etrain_batch_size": 3,
                               "train_batch_size": 1}),
        "many-unknown-keys": doc(train_batch_size=1, **{"zero_optimizatio%d" % i: i for i in range(200)}),
        "not-an-object": "[1, 2, 3]",
        "numbers-at-the-edge": doc(train_batch_size=1.0, train_micro_batch_size_per_gpu=1e-300,
                                   gradient_accumulation_steps=9223372036854775807),
    }
    # A real config with a value made hostile at each of its read keys, and the real config cut short.
    z3 = json.loads(real("deepspeed", "ds_config_z3.json"))
    for key in ("train_batch_size", "zero_optimization", "bf16", "optimizer"):
        d = copy.deepcopy(z3)
        d[key] = {"enabled": "auto", "stage": 18446744073709551615, "type": None}
        seeds[f"z3-hostile-{key}"] = json.dumps(d)
    hf = real("deepspeed", "hf_ds_config_zero3.json")
    seeds["hf-zero3-cut"] = hf[: len(hf) // 2]
    for name, text in seeds.items():
        write("deepspeed_config", name, text)


def torchtitan_config():
    """torchtitan job files that are malformed, nested deep, or with degrees that cannot hold; some with
    overrides (a first byte below 8: their count, then two bytes each, see fuzz/imports_target.cpp)."""
    par = "[parallelism]\n"
    seeds = {
        "degrees-huge": par + "tensor_parallel_degree = 9223372036854775807\npipeline_parallel_degree = 2\n",
        "degrees-product-overflow": par + "".join(
            f"{k} = 1000000\n" for k in ("data_parallel_replicate_degree", "data_parallel_shard_degree",
                                         "tensor_parallel_degree", "pipeline_parallel_degree",
                                         "context_parallel_degree")),
        "shard-zero": par + "data_parallel_shard_degree = 0\n",
        "shard-minus-two": par + "data_parallel_shard_degree = -2\nexpert_tensor_parallel_degree = 3\n",
        "wrong-kinds": par + "tensor_parallel_degree = \"4\"\npipeline_parallel_degree = 2.0\n"
                             "context_parallel_degree = nan\n[training]\nseq_len = inf\nlocal_batch_size = []\n",
        "dates": "[training]\nseq_len = 1979-05-27T07:32:00Z\nsteps = 07:32:00\n",
        "sections-not-tables": "parallelism = 4\ntraining = [1, 2]\nactivation_checkpoint = \"full\"\n",
        "nested-arrays": "a = " + "[" * 300 + "]" * 300 + "\n",
        "nested-inline-tables": "a = " + "{b = " * 300 + "1" + "}" * 300 + "\n",
        "dotted-key-deep": "." .join(["a"] * 40) + " = 1\n",
        "dotted-key-in-inline-table": "a = {" + ".".join(["b"] * 40) + " = 1}\n",
        "dotted-key-after-quoted-equals": "\"=\"." + ".".join(["b"] * 40) + " = 1\n",
        "table-header-quoted-bracket": "[a.\"]\"." + ".".join(["b"] * 40) + "]\n",
        "invalid-utf8": b"[job]\ndescription = \"\xff\xfe\xc0\xaf\"\n",
        "pipeline-bad": par + "pipeline_parallel_degree = 4\npipeline_parallel_schedule = \"Interleaved1F1B\"\n"
                              "pipeline_parallel_layers_per_stage = 0\npipeline_parallel_microbatch_size = -1\n"
                              "module_fqns_per_model_part = [[\"a\"], 3]\n",
        "ac-bad": "[activation_checkpoint]\nmode = \"selective\"\nselective_ac_option = \"-3\"\n"
                  "per_op_sac_force_recompute_mm_shapes_by_fqns = 7\n",
        "converters": "[model]\nconverters = [\"float8\", \"mx\", 1]\n[quantize.linear.float8]\nrecipe_name = 4\n",
        "overrides-only": bytes([3, 2, 3, 0, 6, 15, 12]),
        "overrides-bad-values": bytes([7, 0, 9, 1, 10, 2, 11, 3, 12, 7, 13, 10, 14, 15, 15]) + b"[training]\n",
    }
    # The real files cut short, and the real files under overrides.
    for name in ("llama3_8b_2025-06.toml", "deepseek_v3_671b.toml", "llama4_17bx128e.toml"):
        text = real("torchtitan", name)
        base = os.path.splitext(name)[0]
        seeds[f"{base}-cut"] = text[: len(text) // 2]
        seeds[f"{base}-overrides"] = bytes([4, 2, 2, 0, 3, 3, 6, 11, 8]) + text.encode()
    for name, text in seeds.items():
        write("torchtitan_config", name, text)


if __name__ == "__main__":
    launcher()
    printable()
    outputs()
    snapshots()
    records()
    megatron_args()
    deepspeed_config()
    torchtitan_config()
