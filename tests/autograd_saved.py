# autograd_saved.py: what PyTorch's autograd keeps for a computation, for the tests that price the ledger's
# entries against it (tests/moe_experts_saved_test.py, tests/megatron_unfused_saved_test.py). Needs torch.
import torch


def saved_bytes(fn):
    """Runs fn under a saved-tensors hook; returns (the bytes of the distinct storages autograd keeps, fn's
    result). The result holds the graph, so every saved storage stays alive and no address is reused."""
    storages = {}

    def pack(t):
        st = t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()
        storages[st.data_ptr()] = st.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = fn()
    return sum(storages.values()), out


def kept_bytes(fn):
    """Returns the bytes of the distinct storages autograd keeps while fn's result is alive."""
    return saved_bytes(fn)[0]
