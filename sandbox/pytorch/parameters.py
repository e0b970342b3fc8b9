"""The parameters and buffers of an imported module that its initialisation sets to one value (a norm's weight 1 and
bias 0, running statistics 0 and 1): a kernel that hard-codes them is right on the module's own values alone, so
they are drawn too, in the import's ``parameters`` variant (``sandbox.pytorch.numerics``) and in the task's trials
(a named distribution ``drawn`` beside ``module``)."""

from __future__ import annotations

from ..tasks.dtypes import to_compute
from ..tasks.inputs import generate

PARAMETERS = "parameters"   # the import's variant with these drawn (forward's arguments the problem's own)


def drawn_parameters(model, single: set[str] = frozenset()) -> dict[str, dict]:
    """The parameters and buffers that the module initialises to one value (a norm's weight 1 and bias 0, running
    statistics 0 and 1), each with the distribution it is drawn from in the ``parameters`` variant (the fields of a
    task's named ``Distribution``): a value c != 0 from U(c/2, 3c/2) (the sign kept: a variance stays positive),
    zero from N(0, 1). Randomly initialised ones vary with every trial's seed already. One element is one value
    only for the keys in ``single`` (a shape that no size changes: a learnable scalar, not a weight at a tiny size)."""
    drawn = {}
    for key, t in [*model.named_parameters(), *model.named_buffers()]:
        if not t.is_floating_point() or t.numel() == 0 or (t.numel() == 1 and key not in single):
            continue
        v = t.detach().double()
        c = float(v.reshape(-1)[0])
        if not bool((v == c).all()):
            continue
        if c == 0:
            drawn[key] = dict(name="drawn", kind="normal", scale=1.0)
        else:
            low, high = sorted((0.5 * c, 1.5 * c))
            drawn[key] = dict(name="drawn", kind="uniform", low=low, high=high)
    return drawn


def draw_into(model, drawn: dict[str, dict], seed: int) -> dict:
    """Each parameter or buffer of ``drawn`` redrawn in place in ``model``, as the sandbox's generator draws it;
    returns the new values by key."""
    import numpy as np
    import torch

    state = dict([*model.named_parameters(), *model.named_buffers()])
    out = {}
    with torch.no_grad():
        for i, (key, dist) in enumerate(sorted(drawn.items())):
            t = state[key]
            name = str(t.dtype).removeprefix("torch.")
            spec = dict(dist=dist["name"], kind=dist["kind"], shape=list(t.shape), dtype=name, offset=0.0,
                        scale=dist.get("scale", 1.0), low=dist.get("low", -1.0), high=dist.get("high", 1.0))
            values = to_compute(np, generate(np, spec, seed + 104729 * (i + 1)), name)
            t.copy_(torch.from_numpy(np.ascontiguousarray(values)).to(t.dtype))
            out[key] = t.detach().clone()
    return out
