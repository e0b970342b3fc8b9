"""Harness kernels that guard a measurement (harness.cu): the agreement test of a candidate output with
the baseline's (``sandbox.judging.agreement``), the masks that keep a stored baseline output unreadable to
candidates, the L2 flush and the stream hold. Trusted code, held by the ``Harness`` and used by the benchmarks."""

from __future__ import annotations

import ctypes
import math
from dataclasses import dataclass

import numpy as np

from ..judging.agreement import PROJECTIONS, UNSIGNED, Agreement, exact, mask_value, per_word, scaled_tolerance
from ..tasks.dtypes import by_storage


@dataclass(frozen=True)
class MaskKeys:
    k1: int
    k2: int


ROW = 1 + PROJECTIONS + 3   # an agreement row: sum of t^2, the projections; elements that disagree, the first, repeated


def hashable_words(c) -> bool:
    """Whether an output's hash can be taken as 4-byte words in place (contiguous, whole words, aligned)."""
    return bool(c.flags.c_contiguous) and c.nbytes % 4 == 0 and c.data.ptr % 4 == 0


def _grid(items: int, sms: int, per_sm: int = 16) -> int:
    return max(1, min(math.ceil(items / 256), sms * per_sm))


def _bits(cp, array):
    """A contiguous array's elements as unsigned integers of the same size."""
    return array.reshape(-1).view({1: cp.uint8, 2: cp.uint16, 4: cp.uint32, 8: cp.uint64}[array.dtype.itemsize])


@dataclass
class Repeats:
    """What lets the agreement test leave out its pass where a launch's output repeats, bit for bit, one the test
    already compared with the baseline's output for the same inputs (untimed launches on one input set mostly do): ``seen``,
    a device pair [the output's hash after the launch, the seal of the last output compared], the hash's seed and the
    seal's keys (``seal`` in harness.cu). Drawn anew with every stored baseline output, so nothing of it carries over
    to other inputs; the keys reach the device only as kernel arguments."""

    seen: object
    seed: int
    s1: int
    s2: int


class DeviceAgreement:
    """The agreement test and the masks on one stream. ``function(name)`` returns a harness kernel;
    ``rng`` (a secret generator) draws the mask keys."""

    def __init__(self, cp, function, stream, sms: int, rng):
        self.cp, self.stream, self.sms, self.rng = cp, stream, sms, rng
        self._function = function
        self._result = cp.zeros(ROW, dtype=cp.uint64)

    def new_keys(self) -> MaskKeys:
        return MaskKeys(self.rng.getrandbits(64), self.rng.getrandbits(64))

    def repeats(self) -> Repeats:
        """A new ``Repeats``, for one stored baseline output: no output compared yet."""
        return Repeats(self.cp.zeros(2, dtype=self.cp.uint64), self.rng.getrandbits(63), self.rng.getrandbits(64),
                       self.rng.getrandbits(64))

    def mask(self, array, keys: MaskKeys) -> None:
        """XOR the keyed stream into a contiguous array, in place (a second call restores it)."""
        bits = _bits(self.cp, array)
        n = int(bits.size)
        if n:
            words = math.ceil(n / per_word(array.dtype.itemsize))
            self._function(f"mask_bits<{UNSIGNED[array.dtype.itemsize]}>")(
                (_grid(words, self.sms),), (256,), (bits, np.int64(n), np.uint64(keys.k1), np.uint64(keys.k2)),
                stream=self.stream)

    def agree(self, c, masked, keys: MaskKeys, atol: float, rtol: float, sign_key: int,
              repeats: Repeats | None = None) -> Agreement:
        """One pass over ``c`` and the masked baseline output; returns once the result is on the host."""
        if c.size == 0:
            return self.read(0, None)
        res = self.queue(c, masked, keys, atol, rtol, sign_key, self._result, repeats)
        host = res.get(stream=self.stream)
        self.stream.synchronize()
        return self.read(int(c.size), host)

    def queue(self, c, masked, keys: MaskKeys, atol: float, rtol: float, sign_key: int, res=None,
              repeats: Repeats | None = None):
        """The pass of ``agree`` queued on the stream, behind the launch it checks, its result left on the device
        (in ``res``, else a new row); ``read`` makes an ``Agreement`` of that row once it is on the host.

        With ``repeats`` (and an output of whole 4-byte words), the output is hashed first, and an output that
        repeats the last one compared under these ``repeats`` is not compared again; either way it is then sealed as
        compared. An output that failed is sealed too: the stage ends at the first launch that fails, so what repeats
        it later is never the verdict. Without ``repeats`` (a timed launch) the output is always compared."""
        cp = self.cp
        n = int(c.size)
        res = cp.zeros(ROW, dtype=cp.uint64) if res is None else res
        if n == 0:
            return res
        cp.cuda.runtime.memsetAsync(res.data.ptr, 0, res.nbytes, self.stream.ptr)
        cp.cuda.runtime.memsetAsync(res.data.ptr + res.nbytes - 16, 0xFF, 8, self.stream.ptr)
        a2, r2 = scaled_tolerance(atol, rtol)
        words = math.ceil(n / per_word(c.dtype.itemsize))
        use = repeats if repeats is not None and hashable_words(c) else None
        if use is not None:
            flat = c.reshape(-1).view(cp.uint32)
            cp.cuda.runtime.memsetAsync(use.seen.data.ptr, 0, 8, self.stream.ptr)
            self._function("hash_words")((_grid(int(flat.size), self.sms),), (256,),
                                         (flat, np.int64(flat.size), np.uint64(use.seed), use.seen[:1]),
                                         stream=self.stream)
        seen, s1, s2 = (use.seen, use.s1, use.s2) if use is not None else (np.uint64(0), 0, 0)   # 0: a null pointer
        self._function(f"agree<{by_storage(c.dtype.name).ctype}>")(
            (_grid(words, self.sms),), (256,),
            (c.reshape(-1), masked.reshape(-1), np.int64(n), np.float64(a2), np.float64(r2),
             np.int32(exact(c.dtype.name, atol, rtol)), np.uint64(keys.k1), np.uint64(keys.k2),
             np.uint64(sign_key), seen, np.uint64(s1), np.uint64(s2), res[: 1 + PROJECTIONS].view(cp.float64),
             res[1 + PROJECTIONS:]),
            stream=self.stream)
        if use is not None:
            self._function("seal_compared")((1,), (32,), (use.seen, np.uint64(use.s1), np.uint64(use.s2)),
                                            stream=self.stream)
        return res

    @staticmethod
    def read(n: int, host) -> Agreement:
        """The ``Agreement`` of a result row (``queue``) read to the host, for an output of ``n`` elements."""
        if n == 0:
            return Agreement(n=0, violations=0, first=None, sum_t2=0.0, sums=(0.0,) * PROJECTIONS)
        host = np.asarray(host, dtype=np.uint64)
        values = host[: 1 + PROJECTIONS].view(np.float64)
        bad, first, repeated = int(host[-3]), int(host[-2]), bool(host[-1])
        return Agreement(n=n, violations=bad, first=first if bad else None, sum_t2=float(values[0]),
                         sums=tuple(float(v) for v in values[1:]), repeated=repeated)

    def unmasked(self, masked, keys: MaskKeys, index: int):
        """One element of a masked baseline output, unmasked on the host (for messages)."""
        flat = masked.reshape(-1)
        raw = _bits(self.cp, flat[index: index + 1]).get()
        size = flat.dtype.itemsize
        bits = mask_value(int(raw[0]), index, size, keys.k1, keys.k2)
        return np.frombuffer(bits.to_bytes(size, "little"), dtype=flat.dtype.name)[0].item()


class L2Flush:
    """Empties the L2 by reading a zeroed buffer of ``factor`` times its size (``l2_flush_read``): every
    line the last launch or the input generation left, dirty or clean, is evicted and written back during
    the flush, so the next timed launch starts on clean lines with nothing left to write back."""

    def __init__(self, cp, function, stream, sms: int, l2_bytes: int, rng, factor: int = 2):
        self.stream, self.sms = stream, sms
        self.nbytes = factor * l2_bytes
        self._kernel = function("l2_flush_read")
        self._buf = cp.zeros(math.ceil(self.nbytes / 16) * 2, dtype=cp.uint64)
        self._out = cp.zeros(1, dtype=cp.uint64)
        self._never = np.uint64(rng.getrandbits(63) | 1)

    def __call__(self) -> int:
        n = self._buf.size // 2
        self._kernel((_grid(n, self.sms, 32),), (256,), (self._buf, np.int64(n), self._never, self._out),
                     stream=self.stream)
        return self.nbytes


class StreamHold:
    """Keeps host latency out of a timed launch. After a synchronisation the GPU is idle: a start event recorded
    then runs at once, and the launch behind it arrives only when the host has done its part (Python, argument
    packing, the driver's launch path), so the timed interval held that latency too, the same absolute amount
    for every implementation, which pulls every speedup toward 1 and moves with the host's load. ``hold()``
    queues a one-thread kernel (``hold_stream``) that waits for a flag in mapped host memory; the caller records
    the start event and queues the launch and the end event; ``release()`` sets the flag. The start event then
    runs with the whole launch queued behind it. The kernel gives up after ``limit_ns`` (a host preempted that
    long, or a library call that waits for the device inside itself): ``ran_out`` says so once the stream has
    synchronised."""

    def __init__(self, cp, function, stream, limit_ns: int = 50_000_000):
        runtime = cp.cuda.runtime
        self.stream, self.limit_ns = stream, limit_ns
        self._kernel = function("hold_stream")
        self._host = runtime.hostAlloc(8, runtime.hostAllocMapped)   # freed with the process
        self._device = np.uint64(runtime.pointerGetAttributes(self._host).devicePointer)
        self._flag = ctypes.c_uint32.from_address(self._host)
        self._outcome = ctypes.c_uint32.from_address(self._host + 4)
        self.held = self.ran_outs = 0

    def hold(self) -> None:
        self._flag.value = 0
        self._outcome.value = 0
        self._kernel((1,), (1,), (self._device, np.uint64(self.limit_ns)), stream=self.stream)
        self.held += 1

    def release(self) -> None:
        self._flag.value = 1

    def ran_out(self) -> bool:
        """Whether the last hold ended on its limit, not on ``release`` (ask once, after the stream
        synchronised; ``ran_outs`` counts them)."""
        out = self._outcome.value == 2
        self.ran_outs += out
        return out


WROTE_OUTSIDE = "a launch wrote outside its own buffers"


def overwritten(labels: list[tuple[str, str]], now, then, why: str = WROTE_OUTSIDE) -> list[str]:
    """The problems of buffers whose bytes changed: ``labels`` holds (what the problem names, when it was seen, or
    ""), ``now`` and ``then`` one hash per label in the same order (device arrays: one transfer to the host).
    The one comparison behind the stage's fences (``Fence.broken``) and its check of rotating inputs."""
    changed = (now != then).tolist()
    return [f"{label} was overwritten{' ' + when if when else ''}: {why}"
            for (label, when), bad in zip(labels, changed) if bad]


class Fence:
    """Hashes of buffers that no launch may write while the fence stands: taken when it is raised, compared when
    it is checked. The stage fences the buffers that are idle in a span of it (other rotating sets, other
    implementations' outputs and scratch, copies kept for the reference), so a write anywhere in them, however
    far from the launch's own buffers, is seen and named. Each buffer is hashed whole, guard bands included."""

    def __init__(self, h, seed: int):
        self.h, self.seed = h, seed
        self.arrays: dict[str, object] = {}
        self.hashes = None   # a device array: one hash per fenced buffer

    def raise_(self, arrays: dict[str, object], hashes: list | None = None) -> None:
        """``arrays``: label (what a problem names) -> a device array; ``hashes``: theirs (device scalars) where
        already taken. All of them hashed by one launch (``Harness.hash_arrays``)."""
        self.arrays = dict(arrays)
        if hashes is not None:
            cp = self.h.cp
            self.hashes = cp.concatenate([d.ravel() for d in hashes]) if hashes else cp.zeros(0, dtype=cp.uint64)
        else:
            self.hashes = self.h.hash_arrays(list(self.arrays.values()), self.seed)

    def broken(self, why: str = WROTE_OUTSIDE) -> list[str]:
        """The labels of fenced buffers whose bytes changed, as problems (``overwritten``)."""
        if not self.arrays:
            return []
        now = self.h.hash_arrays(list(self.arrays.values()), self.seed)
        return overwritten([(label, "") for label in self.arrays], now, self.hashes, why)
