"""Every launch of the candidate in the timing stage compared on the device with the baseline's output for the same
inputs (``sandbox.judging.agreement``, ``guards.DeviceAgreement``); the first that disagrees ends the stage,
``wrong``. The baseline's output is masked as soon as it is written (a PyTorch or vendor baseline's copied into the
baseline's buffers first, computed again without TF32 where it is timed with it), its scratch wiped, so nothing the
candidate can read holds an answer. A launch checked alone (a timed one) is always compared in full; a queued one
whose output is, bit for bit, the last compared on these inputs is not compared again (``guards.Repeats``)."""

from __future__ import annotations

from ..judging.compare import spread_atol


class Disagreement(Exception):
    """A candidate launch whose output disagrees with the baseline's for the same inputs."""


class BaselineAgreement:
    """A check of the launcher (``launcher.Launcher``): a baseline launch stores its output, a candidate launch is
    compared with it (queued behind the launch, read with its batch). A candidate launch on inputs the baseline has
    not run on yet in this round (``pending``) is compared once it has. ``repeated``: candidate launches whose
    every output repeated one compared on the same inputs."""

    part = "output checks"

    def __init__(self, h, req, memory, exact, rng):
        self.h, self.cp, self.req, self.memory, self.rng = h, h.cp, req, memory, rng
        self.primary, self.tolerance = req.primary, req.tolerance
        self.exact = exact   # the baseline's outputs computed again with TF32 off, where it is timed with it on
        self.spread_atols: dict[tuple, float] = {}  # (input variant, output) -> atol grown to the spread there
        self.base_keys: dict = {}
        self.repeats: dict = {}   # output -> guards.Repeats of the stored baseline output (new with each one)
        self.repeated = 0
        self.base_for = self.pending = None  # the inputs of the stored baseline output; an unchecked candidate launch
        self.last = 0   # the candidate's latest launch: the one whose outputs its buffers still hold

    def queue(self, launch):
        if launch.name == self.primary:
            if launch.kernel is None:
                self._copy_library_output(launch)
            self._store(launch)
            if self.pending is None or self.pending.inputs is not launch.inputs:
                return None
            waiting, self.pending = self.pending, None
            return self._compare(waiting)
        if launch.kernel is None:
            return None
        self.last = launch.number
        if self.base_for is not launch.inputs:
            self.pending = launch
            return None
        return self._compare(launch)

    def read(self, launch, queued, values: list) -> None:
        candidate, names = queued
        repeated = bool(names)
        for n, row in zip(names, values):
            found = self.h.agreement.read(int(candidate.outs[n].view.size), row)
            self.raise_if_disagrees(found, candidate, n, intact=candidate.number == self.last)
            repeated = repeated and found.repeated
        self.repeated += repeated

    def _compare(self, launch):
        """The agreement of each of the candidate's outputs queued; a launch checked alone always in full."""
        masked, inputs = self.memory.outs(launch.inputs)[self.primary], launch.inputs
        agreement = self.h.agreement
        rows = {n: agreement.queue(b.view, masked[n].view, self.base_keys[n], *self._tolerance(inputs, n),
                                   self.rng.getrandbits(64), repeats=None if launch.alone else self.repeats.get(n))
                for n, b in launch.outs.items()}
        return list(rows.values()), (launch, list(rows))

    def _copy_library_output(self, launch) -> None:
        """A PyTorch or vendor baseline's outputs (untimed: computed again without TF32 where timed with it) into the
        baseline's buffers; what it returned is wiped by the launcher."""
        produced = launch.produced
        if self.exact is not None:
            produced = self.exact(self.cp, **{n: b.view for n, b in launch.inputs.buffers.items()}, **self.req.sizes,
                                  **self.req.scalars)
            launch.wipe += produced.values()
        for n, buf in launch.outs.items():
            buf.view[...] = produced[n].reshape(buf.view.shape)

    def _store(self, launch) -> None:
        """Mask the baseline's fresh output in place and wipe its scratch before anything else runs."""
        checks, inputs = self.h.agreement, launch.inputs
        self.base_keys = {}
        for n, buf in launch.outs.items():
            tol = self.tolerance[n]
            if tol.spread and (inputs.variant, n) not in self.spread_atols:   # once per variant: one transfer
                self.spread_atols[(inputs.variant, n)] = spread_atol(self.cp, buf.view, tol.atol, tol.spread)
            self.base_keys[n] = checks.new_keys()
            self.repeats[n] = checks.repeats()
            checks.mask(buf.view, self.base_keys[n])
        if launch.kernel is not None:
            launch.kernel.poison_scratch(launch.scratch, every=True)
        self.base_for = inputs

    def _tolerance(self, inputs, name: str) -> tuple[float, float]:
        """(atol, rtol) of output ``name`` on these inputs: atol grown to the spread of the baseline's output."""
        tol = self.tolerance[name]
        return self.spread_atols.get((inputs.variant, name), tol.atol), tol.rtol

    def raise_if_disagrees(self, found, launch, name: str, intact: bool) -> None:
        """``Disagreement`` naming the launch, where ``found`` (an ``Agreement``) says output ``name`` disagrees;
        ``intact``: the candidate's output buffer still holds that launch's output (its first bad value is shown)."""
        verdict = found.verdict()
        if not verdict:
            return
        value = ""
        if intact and found.first is not None:
            got = launch.outs[name].view.reshape(-1)[found.first].item()
            masked = self.memory.outs(launch.inputs)[self.primary][name].view
            base = self.h.agreement.unmasked(masked, self.base_keys[name], found.first)
            value = f": got {got}, the baseline {base}"
        raise Disagreement(f"launch {launch.number} of the candidate in the timing stage ({launch.phase}): output "
                           f"{name!r} disagrees with the baseline's for the same inputs: {verdict}{value}")
