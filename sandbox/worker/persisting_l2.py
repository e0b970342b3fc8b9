"""The L2 state one launch could leave to tilt the next one's time, put back in the GPU worker: the persisting-L2
carve-out set to none (``cudaLimitPersistingL2CacheSize`` 0, so no line can be kept there), the harness stream's
access-policy window cleared, as the worker starts; and every line marked persisting reset to normal
(``cuCtxResetPersistingL2Cache``) after each candidate launch, once it has run, before anything else launches. The
L2 flush before a timed launch evicts every normal line but not a persisting one.

Nothing here may end a stage: where the device or the driver refuses a step, ``record`` says which and why."""

from __future__ import annotations

PERSISTING_L2_LIMIT = 6   # cudaLimitPersistingL2CacheSize, absent from CuPy's runtime constants


class PersistingL2:
    def __init__(self, cp, stream):
        self.cp, self.stream = cp, stream
        self.resets = 0
        self.errors: list[str] = []
        self.window = "not cleared"
        try:
            cp.cuda.runtime.deviceSetLimit(PERSISTING_L2_LIMIT, 0)
        except Exception as exc:
            self.errors.append(f"the persisting-L2 carve-out: {type(exc).__name__}: {exc}")
        try:
            from cuda.bindings import driver
        except Exception as exc:   # the extra that brings the driver's bindings is not installed
            self.errors.append(f"cuda.bindings: {type(exc).__name__}: {exc}")
            self._driver = None
            return
        self._driver = driver
        self.window = self._clear_window()
        self.reset()

    def _clear_window(self) -> str:
        driver = self._driver
        try:
            value = driver.CUstreamAttrValue()
            window = value.accessPolicyWindow
            window.num_bytes, window.hitRatio = 0, 0.0
            window.hitProp = window.missProp = driver.CUaccessProperty.CU_ACCESS_PROPERTY_NORMAL
            err, = driver.cuStreamSetAttribute(driver.CUstream(int(self.stream.ptr)),
                                               driver.CUstreamAttrID.CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW, value)
        except Exception as exc:
            return f"{type(exc).__name__}: {exc}"
        return "cleared" if err == driver.CUresult.CUDA_SUCCESS else f"not cleared: {err.name}"

    def reset(self) -> None:
        """Every persisting line back to normal (a call of the context, not of the stream: after the launch ran)."""
        if self._driver is None:
            return
        try:
            err, = self._driver.cuCtxResetPersistingL2Cache()
        except Exception as exc:
            err = exc
        if err != self._driver.CUresult.CUDA_SUCCESS:
            self.errors.append(f"cuCtxResetPersistingL2Cache: {getattr(err, 'name', err)}")
            self._driver = None   # not again: the record says it stopped
            return
        self.resets += 1

    def record(self, resets_before: int = 0) -> dict:
        """What the result's environment says: the carve-out now, resets since ``resets_before``, the window."""
        try:
            carve_out = int(self.cp.cuda.runtime.deviceGetLimit(PERSISTING_L2_LIMIT))
        except Exception as exc:
            carve_out = None
            self.errors.append(f"reading the carve-out: {type(exc).__name__}: {exc}")
        return {"carve_out_bytes": carve_out, "resets": self.resets - resets_before, "window": self.window,
                "error": "; ".join(self.errors) or None}


class ResetAfterCandidate:
    """A check of the launcher (``launcher.Launcher``): once a candidate launch has been read back (it has run),
    its persisting lines are reset before anything else launches."""

    part = "output checks"

    def __init__(self, l2: PersistingL2, primary: str):
        self.l2, self.primary = l2, primary
        self.resets_before = l2.resets

    def queue(self, launch):
        return ([], None) if launch.kernel is not None and launch.name != self.primary else None

    def read(self, launch, queued, values: list) -> None:
        self.l2.reset()

    def record(self) -> dict:
        return self.l2.record(self.resets_before)
