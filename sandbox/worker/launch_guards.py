"""Writes outside a launch's own buffers, seen by the timing stage: after each launch of a kernel of the stage its
guard bands and its inputs' hashes (``checks.queue_violations``, queued behind the launch and read with its batch);
every rotating set's inputs hashed when generated and checked again before they are generated anew and at the end
of the rounds; over a span of the stage (the warm-up, the untimed launches) the buffers idle there fenced
(``guards.Fence``). A change is a rule broken, ``Violation``, naming the buffer."""

from __future__ import annotations

from .checks import Violation, queue_violations, violations_in
from .guards import Fence, overwritten


class LaunchGuards:
    """A check of the launcher (``launcher.Launcher``): ``queue`` after a launch, ``read`` once its batch is read
    back; and the stage's fences and rotating inputs."""

    part = "output checks"

    def __init__(self, h, hash_seed: int):
        self.h, self.seed = h, hash_seed
        self.fence = Fence(h, hash_seed)
        self.input_hashes: dict[int, dict] = {}  # rotating set -> its inputs' hashes, as last generated
        self.input_notes: list = []  # inputs hashed before a set was generated anew, compared in ``check_inputs``

    # ---- each launch ----------------------------------------------------------------------------------------

    def queue(self, launch):
        if not launch.kernel:
            return None
        groups = {"input": launch.inputs.buffers, "output": launch.outs, "scratch": launch.scratch}
        queued = queue_violations(self.h, groups, launch.inputs.before, self.seed)
        return [queued.values], queued

    def read(self, launch, queued, values: list) -> None:
        problems = violations_in(queued, values[0].tolist())
        if problems:
            raise Violation(launch.name, problems)

    # ---- rotating inputs --------------------------------------------------------------------------------------

    def generated(self, index: int, buffers: dict) -> dict:
        """The hashes of a set's inputs just generated (what each launch on them is checked against)."""
        before = {n: b.data_hash(self.seed) for n, b in buffers.items()}
        self.input_hashes[index] = before
        return before

    def note_inputs(self, index: int, buffers: dict, when: str = "while another set was in use") -> None:
        """Hash the inputs of a set (one about to be generated anew, say), for ``check_inputs`` to compare with
        their hashes as generated: queued on the device, nothing waited for here (a round pays no transfer)."""
        before = self.input_hashes.get(index)
        if before:
            now = self.h.hash_arrays([buffers[n].view for n in before], self.seed)
            self.input_notes.append((index, list(before), now, [d.ravel() for d in before.values()], when))

    def check_inputs(self, sets: list[dict], when: str) -> None:
        """The inputs of these rotating sets still hash as generated, and those of sets generated anew did just
        before (``note_inputs``): each candidate launch on a set checked them after it ran; this sees a write
        from a launch on another set. One transfer for all of them."""
        for i, buffers in enumerate(sets):
            self.note_inputs(i, buffers, when)
        notes, self.input_notes = self.input_notes, []
        if not notes:
            return
        labels = [(f"input {n!r} of rotating set {i}", said) for i, names, _, _, said in notes for n in names]
        cat = self.h.cp.concatenate
        problems = overwritten(labels, cat([now for _, _, now, _, _ in notes]),
                               cat([part for _, _, _, then, _ in notes for part in then]))
        if problems:
            raise Violation("candidate", problems)

    # ---- fences over a span of the stage -------------------------------------------------------------------

    def raise_fence(self, idle: dict) -> None:
        self.fence.raise_(idle)

    def lower_fence(self) -> None:
        self.fence.raise_({}, [])

    def check_fence(self, when: str) -> None:
        problems = self.fence.broken(f"a launch wrote outside its own buffers {when}")
        if problems:
            raise Violation("candidate", problems)
