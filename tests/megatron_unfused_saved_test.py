#!/usr/bin/env python3
# megatron_unfused_saved_test.py: what PyTorch's autograd keeps on Megatron-Core's unfused code paths, the
# evidence for the ledger's entries under model_spec::unfused (planner/ledger.cpp rope_entries, core_entries; docs/model.md,
# "Megatron's unfused paths"). Runs on the CPU the tensor operations of NVIDIA/Megatron-LM@d98e8a64 as Megatron
# writes them, collects every tensor autograd saves (torch.autograd.graph.saved_tensors_hooks), sums their
# distinct storages, and checks the bytes beyond the fused path against the ledger's closed forms:
#  - --no-rope-fusion: rope_utils.py _apply_rotary_pos_emb_bshd l.92-156 and _rotate_half l.73-89, for standard
#    attention (attention.py l.1508-1535, on q and k) and MLA (multi_latent_attention.py l.936-964, on q's and
#    k's rotary parts, mla_rotary_interleaved): 4 tensors of s x d_rot (cos_, sin_ for q and for k) per layer;
#    the fused kernel keeps only the freqs every layer shares.
#  - --no-bias-swiglu-fusion: mlp.py l.318-333 glu() (dense MLP, shared experts) and experts.py l.996-1014
#    (routed experts, times the routing probabilities): silu(x_glu) and x_linear + glu_linear_offset, and for
#    the experts the product the probabilities multiply; bias_swiglu_impl keeps only fc1's output.
#  - --no-masked-softmax-fusion (Megatron's DotProductAttention, --transformer-impl local): fused_softmax.py
#    forward_torch_softmax l.300-335 in fp32 (--attention-softmax-in-fp32 or --apply-query-key-layer-scaling):
#    the fp32 probabilities, and the bf16 probabilities the context bmm keeps (no dropout); the causal mask
#    get_default_causal_mask makes (utils.py l.38-40) when the batch brings none, kept by masked_fill_.
# Needs torch (CI: Debian's python3-torch); exits 1 naming what differs.
# Usage: megatron_unfused_saved_test.py
import sys

import torch
import torch.nn.functional as F

from autograd_saved import kept_bytes

failures = []
bf16 = torch.bfloat16


def check(what, got, want):
    if got != want:
        failures.append(f"{what}: autograd keeps {got} bytes, the ledger prices {want}")


# ---- RoPE, unfused (rope_utils.py l.73-156, copied) ----
def rotate_half(x, interleaved):
    if not interleaved:
        x1, x2 = torch.chunk(x, 2, dim=-1)
        return torch.cat((-x2, x1), dim=-1)
    x1 = x[:, :, :, ::2]
    x2 = x[:, :, :, 1::2]
    x_new = torch.stack((-x2, x1), dim=-1)
    return x_new.view(x_new.shape[0], x_new.shape[1], x_new.shape[2], -1)


def rope_bshd(t, freqs, interleaved=False, mla=False, mscale=1.0):
    rot_dim = freqs.shape[-1]
    t, t_pass = t[..., :rot_dim], t[..., rot_dim:]
    if mla:
        t = torch.cat((t[..., 0::2], t[..., 1::2]), dim=-1)
    cos_ = (torch.cos(freqs) * mscale).to(t.dtype)
    sin_ = (torch.sin(freqs) * mscale).to(t.dtype)
    t = (t * cos_) + (rotate_half(t, interleaved) * sin_)
    return torch.cat((t, t_pass), dim=-1)


S, B, NH, D = 64, 4, 8, 32  # sequence, micro-batch, heads on the rank, head dim (all rotary)
x = torch.randn(S, B, 32, dtype=bf16, requires_grad=True)
w_qkv = torch.randn(3 * NH * D, 32, dtype=bf16, requires_grad=True)
freqs = torch.randn(S, 1, 1, D)


def standard(interleaved):
    def run():
        # linear_qkv, then the split into q, k, v views (attention.py l.1879-1915), rope on q and k
        qkv = F.linear(x, w_qkv).view(S, B, NH, 3 * D)
        q, k, v = torch.split(qkv, [D, D, D], dim=3)
        return rope_bshd(q, freqs, interleaved), rope_bshd(k, freqs, interleaved), v

    return run


def standard_fused():
    qkv = F.linear(x, w_qkv).view(S, B, NH, 3 * D)
    return torch.split(qkv, [D, D, D], dim=3)


base = kept_bytes(standard_fused)  # the linear's input and weight: what both paths keep
for inter in (False, True):
    check(f"unfused RoPE (rotary_interleaved={inter}) beyond the linear", kept_bytes(standard(inter)) - base,
          4 * S * D * 2)

# MLA (multi_latent_attention.py l.936-975): rope on q's rotary part [s, b, n, rope] and k's [s, b, 1, rope]
QK, ROPE, V = 16, 8, 16
q_in = torch.randn(S, B, NH * (QK + ROPE), dtype=bf16, requires_grad=True)
kv_in = torch.randn(S, B, NH * (QK + V), dtype=bf16, requires_grad=True)
kpe_in = torch.randn(S, B, ROPE, dtype=bf16, requires_grad=True)
mla_freqs = torch.randn(S, 1, 1, ROPE)


def mla(unfused):
    def run():
        q = q_in.clone().view(S, B, NH, QK + ROPE)  # linear_q_up_proj's output (clone keeps nothing)
        kv = kv_in.clone().view(S, B, NH, QK + V)
        k_pos = torch.unsqueeze(kpe_in.clone(), -2)
        q_no_pe, q_pos = torch.split(q, [QK, ROPE], dim=-1)
        k_no_pe, value = torch.split(kv, [QK, V], dim=-1)
        if unfused:
            q_pos = rope_bshd(q_pos, mla_freqs, mla=True, mscale=1.3)
            k_pos = rope_bshd(k_pos, mla_freqs, mla=True, mscale=1.3)
        query = torch.cat([q_no_pe, q_pos], dim=-1)
        key = torch.cat([k_no_pe, k_pos.expand(-1, -1, NH, -1)], dim=-1)
        return query.contiguous(), key.contiguous(), value.contiguous()

    return run


check("unfused MLA RoPE (q and k rotary parts)", kept_bytes(mla(True)) - kept_bytes(mla(False)),
      4 * S * ROPE * 2)

# ---- SwiGLU, unfused (mlp.py l.318-333; experts.py l.996-1014) ----
R, FF, OFFSET = 128, 48, 0.0  # rows, the ffn width on the rank, glu_linear_offset's default
fc1 = torch.randn(R, 2 * FF, dtype=bf16, requires_grad=True)
probs = torch.rand(R, 1, dtype=torch.float32, requires_grad=True)


def glu(t):
    x_glu, x_linear = torch.chunk(t, 2, dim=-1)
    return F.silu(x_glu) * (x_linear + OFFSET)


fc1_out = 2 * R * 2 * FF  # what bias_swiglu_impl keeps: fc1's output (the ledger's gate and up)
dense = kept_bytes(lambda: glu(fc1.clone()))
check("unfused SwiGLU beyond fc1's output", dense - fc1_out, 2 * R * FF * 2)
experts = kept_bytes(lambda: (glu(fc1.clone()) * probs).to(bf16))
check("unfused weighted SwiGLU beyond fc1's output and the fp32 probabilities", experts - fc1_out - 4 * R,
      3 * R * FF * 2)

# ---- masked softmax, the torch path in fp32 (fused_softmax.py l.300-335; dot_product_attention.py l.194-239) ----
NP, SQ = 4, 32  # b * heads on the rank, sequence
scores = torch.randn(NP, SQ, SQ, dtype=bf16, requires_grad=True)
value = torch.randn(NP, SQ, D, dtype=bf16, requires_grad=True)
batch_mask = torch.triu(torch.ones(SQ, SQ), diagonal=1).bool()


class FusedUpperTriang(torch.autograd.Function):
    """Stands for ScaledUpperTriangMaskedSoftmax (fused_softmax.py l.11-56): keeps its bf16 output only."""

    @staticmethod
    def forward(ctx, inputs):
        out = torch.softmax(inputs.float().masked_fill(batch_mask, -10000.0), dim=-1).to(inputs.dtype)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, g):
        (out,) = ctx.saved_tensors
        return out * g


def torch_softmax(in_fp32, make_mask):
    def run():
        t = scores.clone()  # baddbmm's output (a new tensor)
        if in_fp32:
            t = t.float()
        mask = torch.triu(torch.ones(SQ, SQ), diagonal=1).bool() if make_mask else batch_mask
        t.masked_fill_(mask, -10000.0)  # attention_mask_func (transformer/utils.py l.54-56)
        p = torch.nn.Softmax(dim=-1)(t)
        if in_fp32:
            p = p.bfloat16()
        return torch.bmm(p, value)

    return run


fused = kept_bytes(lambda: torch.bmm(FusedUpperTriang.apply(scores.clone()), value))
check("torch softmax in fp32 beyond the fused kernel (less the batch's mask, alive anyway)",
      kept_bytes(torch_softmax(True, False)) - fused - SQ * SQ, 2 * NP * SQ * SQ + 2 * NP * SQ * SQ)
check("torch softmax in bf16 beyond the fused kernel (less the batch's mask)",
      kept_bytes(torch_softmax(False, False)) - fused - SQ * SQ, 0)
check("torch softmax in fp32 with its own causal mask, beyond the fused kernel",
      kept_bytes(torch_softmax(True, True)) - fused, 4 * NP * SQ * SQ + SQ * SQ)

if failures:
    print("megatron_unfused_saved_test: " + "; ".join(failures))
    sys.exit(1)
print("megatron_unfused_saved_test: autograd keeps what the ledger prices on the unfused RoPE, SwiGLU and softmax")
