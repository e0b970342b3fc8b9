"""Where a result was produced, as typed parts of ``Result.env``: the device and software fingerprint, the clocks
the timed rounds ran at, the ceilings the roofline is relative to, the stream hold, and on a cluster the GPU
that measured it.

These records are read back from every trace and ledger ever written, so they differ from the sandbox's other
records in two ways (``Recorded``): a key they do not name is kept (``model_extra``) and written back rather
than refused, so that an older or newer trace still loads; and a field that was never set is left out of the
JSON, so that a record dumps exactly the keys it was built or loaded with (a compile-only result's environment
is ``{"gpu": null, "arch": "sm_90"}`` in JSON, as before these records were typed).
"""

from __future__ import annotations

from typing import Union

from pydantic import BaseModel, ConfigDict, Field, model_serializer

Number = Union[int, float]   # NVML and the ceilings give either; the union keeps the JSON as it was read

READINGS = ("sm_clock_mhz", "mem_clock_mhz", "temperature_c", "power_w")


class Recorded(BaseModel):
    """A record of a result's JSON that keeps unknown keys and dumps only the fields it was given."""

    model_config = ConfigDict(extra="allow")

    @model_serializer(mode="wrap")
    def _given_only(self, handler):
        out = handler(self)
        given = self.model_fields_set | set(self.model_extra or ())
        return {k: v for k, v in out.items() if k in given}


class ClockReadings(Recorded):
    """One NVML reading of the device (``sandbox.plumbing.envinfo.clocks``); empty where NVML is unavailable."""

    sm_clock_mhz: Number | None = Field(None, description="SM clock, MHz.")
    mem_clock_mhz: Number | None = Field(None, description="Memory clock, MHz.")
    temperature_c: Number | None = Field(None, description="GPU temperature, degrees C.")
    power_w: Number | None = Field(None, description="Board power draw, W.")


class ClockSummary(Recorded):
    """One reading over the timed rounds (``sandbox.plumbing.envinfo.ClockSampler``): read after every timed launch."""

    median: Number
    min: Number
    max: Number
    samples: int = Field(description="How many readings were taken.")


class TimedClocks(Recorded):
    """Each reading summarised over the timed rounds; a reading NVML never gave is absent."""

    sm_clock_mhz: ClockSummary | None = None
    mem_clock_mhz: ClockSummary | None = None
    temperature_c: ClockSummary | None = None
    power_w: ClockSummary | None = None


class Ceilings(Recorded):
    """The device's measured rates (``sandbox.worker.ceilings``, cached per GPU by ``sandbox.host.ceilings``), or
    the fake sandbox's fixed ones: what the roofline floor and "% of roofline" are relative to. A rate the
    measurement did not give is None (caches of version 1 have no ``read_bytes_per_s``)."""

    copy_bytes_per_s: float | None = Field(None, description="Device-to-device copy, read plus write bytes per s.")
    read_bytes_per_s: float | None = Field(None, description="Read-only float4 stream, bytes per s.")
    fp32_flops: float | None = Field(None, description="FP32 matmul (cuBLAS), FLOP per s.")
    fp16_tensor_flops: float | None = Field(None, description="FP16 tensor-core matmul (cuBLAS), FLOP per s.")
    method: str | None = Field(None, description="How the rates were measured (or that they were not).")
    gpu: str | None = Field(None, description="The GPU they were measured on.")
    driver: str | None = Field(None, description="Its driver then.")
    measured_at: str | None = Field(None, description="When, as local ISO time.")

    def memory_bandwidth(self) -> float | None:
        """Bytes/s of the memory roofline: the higher of the copy and the read-only rate (either may be absent)."""
        rates = [r for r in (self.copy_bytes_per_s, self.read_bytes_per_s) if r]
        return max(rates) if rates else None

    def peak_flops(self, compute: str) -> float | None:
        """The compute roof for a task's ``roofline.compute`` (``fp32`` or ``fp16_tensor``); None for another."""
        return {"fp32": self.fp32_flops, "fp16_tensor": self.fp16_tensor_flops}.get(compute)


class LaunchHold(Recorded):
    """The stream hold of a timing stage (``sandbox.worker.timing``): launches queued behind a held stream."""

    held: int = Field(description="Rounds whose launches were queued behind the hold.")
    ran_out: int = Field(description="Holds that ran out before the queue was released.")
    unheld: list[str] = Field(description="Implementations timed without a hold.")
    error: str | None = Field(None, description="Why holding stopped or never began; absent while it worked.")


class PersistingL2(Recorded):
    """The persisting-L2 state the timing stage put back (``sandbox.worker.persisting_l2``): no carve-out, the stream's
    access-policy window cleared, persisting lines reset after each candidate launch."""

    carve_out_bytes: int | None = Field(None, description="The persisting-L2 carve-out as the stage ended (0: none).")
    resets: int = Field(0, description="Candidate launches after which every persisting line was reset to normal.")
    window: str = Field("", description="The stream's access-policy window: cleared, or why not.")
    error: str | None = Field(None, description="A step the device or driver refused; absent where none was.")


class MeasuredOn(Recorded):
    """The GPU of a cluster that measured a result (``sandbox.cluster.actor.where_measured``)."""

    id: str = Field(description="host/UUID for a real GPU, else host/Ray node/Ray's GPU number: one GPU in a run.")
    host: str | None = None
    node: str | None = Field(None, description="Ray's node id.")
    gpu: str | None = Field(None, description="The GPU model.")
    uuid: str | None = None
    pci_bus_id: str | None = None
    ray_gpus: list[str] = Field(default_factory=list, description="Ray's GPU numbers given to the actor.")


class Environment(Recorded):
    """``Result.env``: what produced the result. A GPU sandbox writes the device info of its GPU worker
    (``sandbox.plumbing.envinfo.device_info``) and, for a timed result, what the timing stage adds
    (``sandbox.host.timing.timing_env``); the fake sandbox names a simulated device with fixed ceilings; the
    compile-only sandbox only the target arch; a cluster adds ``measured_on``."""

    simulated: bool = Field(False, description="The fake sandbox made it up: no figure in the result was measured.")
    gpu: str | None = Field(None, description="The device's name (None: compile-only, no GPU).")
    uuid: str | None = Field(None, description="The device's UUID, hex.")
    pci_bus_id: str | None = None
    compute_capability: str | None = Field(None, description='"9.0", ...')
    arch: str | None = Field(None, description='The target the code was compiled for: "sm_90", ...')
    sms: int | None = Field(None, description="Streaming multiprocessors.")
    l2_bytes: int | None = None
    memory_bytes: int | None = Field(None, description="Global memory of the device.")
    shared_per_block_optin: int | None = Field(None, description="Shared memory a block may opt in to, bytes.")
    shared_per_sm: int | None = Field(None, description="Shared memory per multiprocessor, bytes.")
    max_clock_mhz: int | None = Field(None, description="The device's rated SM clock.")
    driver: str | None = Field(None, description="The NVIDIA driver (NVML); None where NVML is missing.")
    cuda_driver_api: str | None = Field(None, description="The CUDA version of the driver API.")
    cuda_runtime: str | None = Field(None, description="The CUDA runtime version.")
    python: str | None = None
    kernelwright: str | None = Field(None, description='The installed version, or "checkout".')
    nvrtc: str | None = Field(None, description="NVRTC's version, or why it is unavailable.")
    cupy: str | None = None
    cuda_bindings: str | None = None
    host: str | None = Field(None, description="The machine's network name.")
    platform: str | None = Field(None, description="sys.platform.")
    clocks_at_start: ClockReadings | None = Field(None, description="Read as the GPU worker started (an idle GPU).")
    clocks_start: ClockReadings | None = Field(None, description="Read as the timing stage began.")
    clocks_end: ClockReadings | None = Field(None, description="Read as the timing stage ended.")
    clocks_timed: TimedClocks | None = Field(None, description="Read after every timed launch, summarised.")
    sm_clock_mhz: Number | None = Field(None, description="Median over the timed rounds (older traces: at start).")
    mem_clock_mhz: Number | None = Field(None, description="Median over the timed rounds (older traces: at start).")
    temperature_c: Number | None = Field(None, description="Median over the timed rounds (older traces: at start).")
    power_w: Number | None = Field(None, description="Median over the timed rounds (older traces: at start).")
    ceilings: Ceilings | None = Field(None, description="The ceilings the roofline floor was computed at.")
    launch_hold: LaunchHold | None = None
    persisting_l2: PersistingL2 | None = None
    timing_split_s: dict[str, Number] | None = Field(None, description="The timing stage's seconds in the GPU worker, "
                                                    "per part (``other``: what no part took).")
    measured_on: MeasuredOn | None = Field(None, description="On a cluster: the GPU that measured it.")

    def describe_reading(self, key: str) -> str | None:
        """A clock, temperature or power reading (one of ``READINGS``), and when it was taken."""
        timed = getattr(self.clocks_timed, key, None) if self.clocks_timed else None
        if timed:
            return (f"{timed.median:g} (median of {timed.samples} readings during the timed rounds, "
                    f"{timed.min:g} to {timed.max:g})")
        value = getattr(self, key)
        return None if value is None else f"{value:g} (read when the GPU worker started, not during timing)"

    def measured_by(self) -> str | None:
        """The id of the cluster GPU that measured the result; None off a cluster."""
        return self.measured_on.id if self.measured_on else None
