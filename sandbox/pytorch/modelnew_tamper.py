"""What a ModelNew solution may not change in the process that judges it (sandbox.pytorch.modelnew_run).

The solution's Python runs in the same process as its float64 reference, PyTorch eager, ``torch.compile`` and the
timer, as KernelBench runs it, and Python there can replace any of them: a ``torch.nn.functional.gelu`` that
returns what the solution returns makes the reference agree with it; an eager layer that sleeps, or cuDNN turned
off, makes every speedup larger; a ``torch.cuda.Event.elapsed_time`` that divides makes the timing lie.

``Watch`` takes a fingerprint of what the judgement relies on before the solution's module runs, and compares it
after the module ran, after the correctness stage and after the timing. The fingerprint holds every function,
class and submodule of PyTorch's namespaces that a module's ``forward`` reaches (``torch``, ``torch.nn.functional``
and the ``torch._C`` modules it calls, ``linalg``, ``fft``, ``special``, ``cuda``), the methods and descriptors of
``torch.Tensor``, ``torch.nn.Module``, every ``torch.nn`` layer and the CUDA event and stream, ``time``'s clocks and
``random`` (which orders the calls),
the settings that would slow eager or change the reference (reduced-precision reductions, cuDNN on, deterministic
modes, the default dtype, the thread count) and the kernels registered over ``aten`` operators through
``torch.library``. Whatever was replaced, removed or set differently is named, and the solution is ``rejected``.
Attributes added are not looked at (PyTorch loads submodules lazily).

Not reached: native code writing the process's own memory (ctypes, a kernel registered over an ``aten`` operator
from C++) and code reading the judge's heap or frames (gc, ``sys._getframe``), which no check inside one process can
rule out; a time below the hardware's floor is flagged by
``sandbox.host.floor`` whatever produced it.
"""

from __future__ import annotations

import importlib
import inspect
import sys
import types

MODULES = ("torch", "torch.nn.functional", "torch._C._nn", "torch._C._linalg", "torch._C._fft", "torch._C._special",
           "torch.linalg", "torch.fft", "torch.special", "torch.nn.init", "torch.cuda", "torch.autograd", "time", "random")
_DESCRIPTORS = (property, staticmethod, classmethod, types.MemberDescriptorType, types.GetSetDescriptorType)


def _classes() -> list[type]:
    import random

    import torch

    layers = {cls for mod in (torch.nn, torch.nn.modules) for cls in vars(mod).values()
              if inspect.isclass(cls) and issubclass(cls, torch.nn.Module)}
    out = [torch.Tensor, torch.nn.Module, torch.nn.Parameter, torch.autograd.Function, torch.cuda.Event,
           torch.cuda.Stream, random.Random, random.SystemRandom, *sorted(layers, key=lambda c: c.__qualname__)]
    return list(dict.fromkeys(out))


def _settings() -> dict[str, object]:
    """The settings under which eager and the reference would run slower or differently. TF32 and cuDNN's autotuner
    are not among them: a solution may turn them on for its own layers, eager and compile run with TF32 as the
    judgement says whatever they are (``runtime.tf32``), and the autotuner only makes eager faster."""
    import torch

    b = torch.backends
    return {
        "torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction":
            b.cuda.matmul.allow_fp16_reduced_precision_reduction,
        "torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction":
            b.cuda.matmul.allow_bf16_reduced_precision_reduction,
        "torch.backends.cudnn.enabled": b.cudnn.enabled,
        "torch.backends.cudnn.deterministic": b.cudnn.deterministic,
        "torch.are_deterministic_algorithms_enabled()": torch.are_deterministic_algorithms_enabled(),
        "torch.get_default_dtype()": torch.get_default_dtype(),
        "torch.get_num_threads()": torch.get_num_threads(),
    }


def _aten_overrides() -> set[str]:
    import torch.library

    return {i for i in getattr(torch.library, "_impls", set()) if str(i).startswith("aten/")}


def fingerprint() -> tuple[dict[str, object], dict[str, object], set[str]]:
    """(objects by name, settings by name, aten overrides): the objects themselves are held, so that identity
    compares them (an id could be reused once an object is freed)."""
    objects: dict[str, object] = {}
    for name in MODULES:
        module = sys.modules.get(name) or importlib.import_module(name)
        for attr, value in list(vars(module).items()):
            if callable(value) or isinstance(value, types.ModuleType):
                objects[f"{name}.{attr}"] = value
    for cls in _classes():
        where = f"{cls.__module__}.{cls.__qualname__}"
        for attr, value in list(vars(cls).items()):
            if callable(value) or isinstance(value, _DESCRIPTORS):
                objects[f"{where}.{attr}"] = value
    return objects, _settings(), _aten_overrides()


class Watch:
    """A fingerprint taken now; ``changes()`` names what differs from it since. What PyTorch itself installs on its
    first ``torch.compile`` (dynamo's wrapper of ``nn.Module.__init__``) is installed first, so that it is part of the
    fingerprint rather than a change."""

    def __init__(self):
        _compile_installed()
        self.objects, self.settings, self.overrides = fingerprint()

    def changes(self) -> list[str]:
        objects, settings, overrides = fingerprint()
        out = [f"{name} replaced" if name in objects else f"{name} removed" for name, value in self.objects.items()
               if objects.get(name) is not value]
        out += [f"{name} set to {settings[name]!r} (was {value!r})" for name, value in self.settings.items()
                if settings[name] != value]
        out += [f"a kernel of its own registered for {o.replace('/', '::', 1).replace('/', ' on ')}"
                for o in sorted(overrides - self.overrides)]
        return out


def _compile_installed() -> None:
    try:
        from torch._dynamo.mutation_guard import install_generation_tagging_init
    except Exception:   # a PyTorch without dynamo, or one that installs nothing there
        return
    install_generation_tagging_init()


def describe(changes: list[str]) -> str:
    """One line for the verdict."""
    more = f" (and {len(changes) - 3} more)" if len(changes) > 3 else ""
    return (f"it changed the judging process's PyTorch: {'; '.join(changes[:3])}{more}: the reference, the baselines "
            "and the timer it relies on are no longer PyTorch's own")
