#!/usr/bin/env python3
# moe_experts_saved_test.py: what PyTorch's autograd keeps for Megatron-Core's routed experts and unpermute,
# the evidence for the ledger's MoE entries (planner/ledger.cpp moe_mlp_entries; docs/validation.md, "Terms
# found against these rows"). Runs, on the CPU, the tensor operations of NVIDIA/Megatron-LM@d98e8a64
# TEGroupedMLP.forward for a non-gated MLP without bias fusion (megatron/core/transformer/moe/experts.py
# l.1012-1016: act(fc1) * permuted_probs, .to(bf16), then fc2) and of unpermute (moe_utils.py l.604-617:
# index_add_ under deterministic algorithms, scatter_add_ otherwise), collects every tensor autograd saves
# (torch.autograd.graph.saved_tensors_hooks) and sums their distinct storages. Checks that the expert block
# keeps fc1's input, fc1's output, the activation the probabilities multiply and fc2's input (the four
# ledger entries moe.experts.fc1.input, fc1.output, act.weighted, act.output), and that index_add_ keeps its
# source (moe.unpermute.input) where scatter_add_ keeps none. Needs torch (CI: Debian's python3-torch);
# exits 1 naming what differs.
# Usage: moe_experts_saved_test.py
import sys

import torch
import torch.nn.functional as F

from autograd_saved import saved_bytes

R, H, FF = 256, 64, 128  # routed rows on the rank, hidden, one expert's ffn width (etp 1)
failures = []


def check(what, got, want):
    if got != want:
        failures.append(f"{what}: autograd keeps {got} bytes, the ledger prices {want}")


bf16 = torch.bfloat16
x = torch.randn(R, H, dtype=bf16, requires_grad=True)  # the permuted tokens (fc1's input)
w1 = torch.randn(FF, H, dtype=bf16, requires_grad=True)
w2 = torch.randn(H, FF, dtype=bf16, requires_grad=True)
probs = torch.rand(R, 1, dtype=torch.float32, requires_grad=True)  # --moe-router-dtype fp32


def experts():
    fc1 = F.linear(x, w1)  # keeps x (and the weight, a parameter)
    act = F.gelu(fc1)  # keeps fc1
    weighted = act * probs  # keeps act and probs; fp32 result
    return F.linear(weighted.to(bf16), w2)  # keeps its bf16 input


kept, out = saved_bytes(experts)
params = 2 * (w1.numel() + w2.numel())
ledger = 2 * R * H + 2 * R * FF + 2 * R * FF + 2 * R * FF  # fc1.input, fc1.output, act.weighted, act.output
check("the GeLU experts' block (less the weights and the R fp32 probabilities)", kept - params - 4 * R, ledger)

restore = torch.zeros(R // 2, H, dtype=bf16)
index = torch.randint(0, R // 2, (R,))
tokens = torch.randn(R, H, dtype=bf16, requires_grad=True)  # the experts' output after the combine


def unpermute(deterministic):
    out = torch.zeros_like(restore)
    if deterministic:
        return out.index_add(0, index, tokens)
    return out.scatter_add(0, index.unsqueeze(1).expand(-1, H), tokens)


kept_det, _ = saved_bytes(lambda: unpermute(True))
check("index_add_'s source (less its int64 index)", kept_det - 8 * R, 2 * R * H)
kept_nondet, _ = saved_bytes(lambda: unpermute(False))
check("scatter_add_ (less its int64 index)", kept_nondet - 8 * R, 0)

if failures:
    print("moe_experts_saved_test: " + "; ".join(failures))
    sys.exit(1)
print("moe_experts_saved_test: autograd keeps what the ledger prices for the GeLU experts and the unpermute")
