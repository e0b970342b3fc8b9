"""A ModelNew solution's parameters in the trials that draw them (sandbox.pytorch.modelnew_checks).

An imported task draws the parameters and buffers its module initialises to one value (a norm's weight 1 and bias 0,
running statistics; ``sandbox.pytorch.parameters``) in some of its trials: a kernel that hard-codes them is right on
that one value only. A ModelNew solution gets the same trials: a fresh ``Model`` and ``ModelNew`` pair per such
trial, the drawn values written into ``Model`` and into ``ModelNew``'s counterpart of each before its first call.
The counterpart is the tensor of the same name and shape, else the one tensor of that shape whose last name part
agrees, or the only one of that shape (a solution that keeps ``self.weight`` where ``Model`` has ``self.ln.weight``).
A solution with no counterpart beyond doubt for one of them is not given drawn values for it; the verdict names the
parameters it has none for.
"""

from __future__ import annotations


def trial_parameters(task, rt, sizes: dict, k: int, seed: int) -> dict[str, tuple]:
    """{state key: (values, the task's input name)} for the parameters trial ``k`` draws (its distribution of that
    input is not the module's own)."""
    import numpy as np

    from ..tasks.dtypes import to_compute
    from ..tasks.inputs import generate, input_seed, input_specs

    specs = input_specs(task, sizes, k)
    index = {s["name"]: i for i, s in enumerate(specs)}
    out = {}
    for name, key in rt.spec.parameters.items():
        i = index.get(name)
        if i is None or specs[i]["dist"] == "module":
            continue
        out[key] = (to_compute(np, generate(np, specs[i], input_seed(seed, i)), specs[i]["dtype"]), name)
    return out


def counterparts(model, new) -> dict[str, object]:
    """``ModelNew``'s tensor for each of ``Model``'s parameters and buffers that has one beyond doubt: the one of the
    same name, shape and dtype; else, among its unused tensors of that shape and dtype, the only one whose last name
    part agrees (``norm.weight`` for ``ln.weight``), or the only one there is. Where several could be it (two vectors
    of one length named their own way), it has none: a wrong guess would make an honest solution wrong."""
    mine = [*model.named_parameters(), *model.named_buffers()]
    theirs = [*new.named_parameters(), *new.named_buffers()]
    by_name = dict(theirs)
    used, out = set(), {}
    for key, t in mine:
        other = by_name.get(key)
        if other is not None and other.shape == t.shape and other.dtype == t.dtype:
            out[key] = other
            used.add(key)
    for key, t in mine:
        if key in out:
            continue
        fits = [(name, other) for name, other in theirs
                if name not in used and other.shape == t.shape and other.dtype == t.dtype]
        named = [(name, other) for name, other in fits if name.rsplit(".", 1)[-1] == key.rsplit(".", 1)[-1]]
        pick = named if len(named) == 1 else fits if len(fits) == 1 else []
        if pick:
            out[key] = pick[0][1]
            used.add(pick[0][0])
    return out


def unmatched(model, new, drawn: dict[str, tuple]) -> list[str]:
    """The input names of the parameters in ``drawn`` that ``ModelNew`` has no counterpart for."""
    found = counterparts(model, new)
    return [name for key, (_, name) in drawn.items() if key not in found]


def give(model, new, drawn: dict[str, tuple]) -> None:
    """Write ``drawn`` into ``Model`` and into ``ModelNew``'s counterparts (``unmatched`` says where there are
    none: those are left as they are)."""
    import numpy as np
    import torch

    state = dict([*model.named_parameters(), *model.named_buffers()])
    found = counterparts(model, new)
    with torch.no_grad():
        for key, (values, _) in drawn.items():
            if key in found:
                t = torch.from_numpy(np.ascontiguousarray(values)).reshape(state[key].shape)
                state[key].copy_(t.to(state[key].dtype))
                found[key].copy_(t.to(found[key].dtype))
