#!/usr/bin/env python3
# loss_phase_test.py: the planner's output phase against PyTorch's own autograd. Runs torchtitan's final
# norm, output layer and loss (pytorch/torchtitan@9dec370: models/norms.py RMSNorm, train.py loss_fn and
# `del pred` before backward) on the CPU under torch.profiler's memory events, takes the most bytes alive
# at once above what existed before, and compares it with `headroom plan --json`'s output_phase_bytes for
# the same shapes: the unfused loss (tp = 1, F.cross_entropy) and, at tp = 2, loss_parallel()'s DTensor
# handlers (pytorch/pytorch torch/distributed/tensor/parallel/loss.py _log_softmax and
# _nll_loss_and_log_softmax_backward), whose tensor operations are run here as one rank's local ops with
# the all-reduces left out (they return new tensors of one element per token). Needs torch (CI: Debian's
# python3-torch); exits 1 naming what differs.
# Usage: loss_phase_test.py HEADROOM
import json
import os
import subprocess
import sys
import tempfile

import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile

headroom = sys.argv[1]
T, H, V, HEADS = 1024, 64, 8192, 2  # tokens of one micro-batch, hidden, vocabulary (the logits dominate)
failures = []


def rms_norm(x, weight):
    """torchtitan's RMSNorm.forward at 9dec370."""
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6)).type_as(x) * weight


class LossParallelCrossEntropy(torch.autograd.Function):
    """One rank of loss_parallel(): the forward of _log_softmax_handler + _nll_loss_forward, the backward
    of _nll_loss_and_log_softmax_backward, op for op as loss.py writes them (all-reduces omitted)."""

    @staticmethod
    def forward(ctx, x, target):
        x = x.to(dtype=torch.float32, memory_format=torch.contiguous_format)
        x_max = torch.amax(x, 1, keepdim=True)
        shifted = x - x_max
        shifted_sumexp = torch.sum(torch.exp(shifted), 1, keepdim=True)
        result = shifted - torch.log(shifted_sumexp)
        del shifted
        ctx.save_for_backward(result, target)
        return -torch.gather(result, 1, target.unsqueeze(1)).squeeze(1).mean()

    @staticmethod
    def backward(ctx, grad_output):
        x, target = ctx.saved_tensors
        grad_output = grad_output / x.shape[0]
        grad_input = torch.zeros_like(x)
        grad_input[torch.arange(x.shape[0]), target] = -1.0
        return (grad_input + torch.exp(x)) * grad_output, None


def measured_peak(loss_of, vocab):
    """Returns the most bytes alive at once during forward + backward of the output layer and loss, above
    the leaves made before it (the norm's input, the weights, the targets)."""
    torch.manual_seed(0)
    h = torch.randn(1, T, H, dtype=torch.bfloat16, requires_grad=True)
    norm_w = torch.ones(H, dtype=torch.bfloat16, requires_grad=True)
    w = (0.02 * torch.randn(vocab, H)).to(torch.bfloat16).requires_grad_()
    labels = torch.randint(0, vocab, (1, T))

    def step():
        pred = F.linear(rms_norm(h, norm_w), w)
        loss = loss_of(pred, labels)
        del pred  # torchtitan: "need to free to before bwd to avoid peaking memory"
        loss.backward()

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        step()
    events = [e for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"]
    live = peak = 0
    for e in sorted(events, key=lambda e: e.start_us()):
        live += e.nbytes()
        peak = max(peak, live)
    # The parameter gradients (the output weight's, the norm's) and the input's are the layer's, not the
    # loss's: the planner prices them with the state and the layer's working set.
    return peak - (w.numel() + norm_w.numel() + h.numel()) * 2


def plain(pred, labels):
    return F.cross_entropy(pred.flatten(0, 1).float(), labels.flatten(0, 1))


def parallel(pred, labels):
    return LossParallelCrossEntropy.apply(pred.flatten(0, 1).float(), labels.flatten(0, 1))


def planned(tp):
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "model.json")
        with open(path, "w") as f:
            json.dump({"name": "loss-phase", "source": "tests/loss_phase_test.py", "layers": 2, "hidden": H,
                       "heads": HEADS, "ffn_hidden": 4 * H, "vocab": V, "seq": T, "max_positions": T,
                       "mlp": "swiglu", "norm": "rmsnorm", "position": "rotary", "tied_embeddings": False,
                       "dropout": False, "bias": False}, f)
        flags = ["--tp", str(tp)]  # sequence parallelism is on by default with tp > 1
        done = subprocess.run([headroom, "plan", "--model", path, "--gpus", str(tp), "--loss", "unfused",
                               "--attention", "flash", *flags, "--json", "-"], capture_output=True, text=True)
        if done.returncode != 0:
            failures.append(f"headroom plan tp={tp}: exit {done.returncode}: {done.stderr.strip()}")
            return None
        return json.loads(done.stdout)["stages"][0]["output_phase_bytes"]


for tp, loss_of, what in ((1, plain, "F.cross_entropy"), (2, parallel, "loss_parallel")):
    local_vocab = (V + tp - 1) // tp
    torch_peak = measured_peak(loss_of, local_vocab)
    headroom_peak = planned(tp)
    if headroom_peak is None:
        continue
    per_logit = torch_peak / (T * local_vocab)
    error = (headroom_peak - torch_peak) / torch_peak
    print(f"{what} (tp={tp}): torch {torch_peak} bytes ({per_logit:.2f} per logit), headroom {headroom_peak} "
          f"bytes ({100 * error:+.2f}%)")
    # The tolerance is the norm and linear input the planner keeps for tp ranks (< 1%): the logits' bytes
    # must agree, which the old 18 bytes per logit missed by 50%.
    if abs(error) > 0.02:
        failures.append(f"{what} (tp={tp}): headroom's output phase {headroom_peak} bytes is "
                        f"{100 * error:+.2f}% off PyTorch's measured {torch_peak}")
    expected_per_logit = 12 if tp == 1 else 16
    if abs(per_logit - expected_per_logit) > 0.3:
        failures.append(f"{what}: PyTorch held {per_logit:.2f} bytes per logit, docs/model.md says "
                        f"{expected_per_logit}")

if failures:
    for f in failures:
        print("FAIL:", f)
    sys.exit(1)
print("loss phase: headroom agrees with PyTorch's autograd")
