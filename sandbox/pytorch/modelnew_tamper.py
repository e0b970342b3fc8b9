"""What a ModelNew solution may not change, or read, in the process that judges it (sandbox.pytorch.modelnew_run).

The solution's Python runs in the same process as its float64 reference, PyTorch eager, ``torch.compile``, the timer
and the judge's own code, as KernelBench runs it, and Python there can replace any of them: a
``torch.nn.functional.gelu`` that returns what the solution returns makes the reference agree with it; an eager layer
that sleeps, or cuDNN turned off, makes every speedup larger; a ``torch.cuda.Event.elapsed_time`` that divides makes
the timing lie; the judge's own comparison replaced, or its code swapped, passes anything.

``Watch`` takes a fingerprint of what the judgement relies on before the solution's module runs, and compares it after
the module ran, after the correctness stage and after the timing. The fingerprint holds the problem itself (its state,
and every namespace of it the judgement will use, executed first: ``Model`` and what it resolves through its bases,
``get_inputs``, ``get_init_inputs``, their code), every function, class and submodule of PyTorch's namespaces that a
module's ``forward`` reaches (``torch``, ``torch.nn.functional`` and the ``torch._C`` modules it calls, ``linalg``,
``fft``, ``special``, ``cuda``), of the judge's own modules (every ``sandbox`` module, the judge's imported first) and
of the standard modules the judge computes and replies with (``builtins``, ``math``, ``json``, ``os``, ``pathlib``,
``statistics``, ``copy``, ``dataclasses``, ``time``, ``random``, NumPy, and the process's main module, which writes
the reply); the constants of the judge's modules (a distribution's parameters, a tolerance rule, a dtype table, and
what their dicts and lists hold); every attribute a class resolves through its bases for ``torch.Tensor``,
``torch.nn.Module``, every ``torch.nn`` layer, the CUDA event and stream and the judge's own classes (so a method
added to ``torch.Tensor`` that shadows one it inherits is a change); the code, defaults and keyword defaults of every
Python function among them (so code swapped into a function that stays the same object is a change); the settings that
would slow eager or change the reference (reduced-precision reductions, cuDNN on, deterministic modes, the default
dtype, the thread count, the current CUDA stream and its sync debug mode, a torch function or dispatch mode left in
force, which sees every call the reference makes); the signal handlers and interval timers (a handler runs Python
between any two of the judge's steps) and every ``aten`` operator's dispatch table (a kernel registered over one,
through ``torch.library`` or from C++ in an extension it builds). Whatever was replaced, removed or set differently is
named, and the solution is ``rejected``. Names added that resolved to nothing before are not looked at (PyTorch loads
submodules lazily).

From the moment the watch is made, an audit hook (``sys.addaudithook``, which no Python code can remove) refuses in
this process the calls that read its heap or other threads' frames or that would run code on every call the judge
makes: ``gc.get_objects``, ``gc.get_referrers``, ``gc.get_referents``, ``sys._current_frames``, ``sys.settrace``,
``sys.setprofile`` and any further audit hook. A refused call raises ``RuntimeError`` where it was made, and is named
as a change. The judge and PyTorch make none of these calls.

Not reached: code of the solution that runs after the last check (a thread it leaves running, a finalizer); native code
writing the process's own memory (ctypes, or its extension's own C++) and code changing what the judge keeps through a
frame it can reach (``sys._getframe``, a traceback's ``tb_frame``, which PyTorch and the standard library use too),
which no check inside one process can rule out; it
finds no answer to copy there (the checks and the timing hold none while the solution runs). A time below the
hardware's floor is flagged by ``sandbox.host.floor`` whatever produced it.
"""

from __future__ import annotations

import importlib
import inspect
import signal
import sys
import types

MODULES = ("torch", "torch.nn.functional", "torch._C._nn", "torch._C._linalg", "torch._C._fft", "torch._C._special",
           "torch.linalg", "torch.fft", "torch.special", "torch.nn.init", "torch.cuda", "torch.autograd", "time",
           "random", "builtins", "math", "json", "json.encoder", "json.decoder", "os", "statistics", "copy",
           "dataclasses", "numpy", "pathlib", "__main__")
JUDGE = ("sandbox.pytorch.modelnew_run", "sandbox.pytorch.modelnew_checks", "sandbox.pytorch.modelnew_timing",
         "sandbox.pytorch.modelnew_params", "sandbox.pytorch.modelnew_load", "sandbox.pytorch.problem",
         "sandbox.pytorch.runtime", "sandbox.pytorch.wire", "sandbox.tasks.inputs", "sandbox.tasks.task")
PROBLEM_STATE = ("source", "path", "tree", "constants", "ties", "_cache")   # what defines the problem
REFUSED = ("gc.get_objects", "gc.get_referrers", "gc.get_referents", "sys._current_frames", "sys.settrace",
           "sys.setprofile", "sys.addaudithook")
_DESCRIPTORS = (property, staticmethod, classmethod, types.MemberDescriptorType, types.GetSetDescriptorType)


def _classes() -> list[type]:
    import pathlib
    import random

    import torch

    layers = {cls for mod in (torch.nn, torch.nn.modules) for cls in vars(mod).values()
              if inspect.isclass(cls) and issubclass(cls, torch.nn.Module)}
    judge = {cls for name, mod in list(sys.modules.items()) if name.startswith("sandbox.") and mod is not None
             for cls in list(vars(mod).values()) if inspect.isclass(cls) and cls.__module__ == name}
    out = [torch.Tensor, torch.nn.Module, torch.nn.Parameter, torch.autograd.Function, torch.cuda.Event,
           torch.cuda.Stream, random.Random, random.SystemRandom, pathlib.Path, type(pathlib.Path()),
           *sorted(layers, key=lambda c: c.__qualname__),
           *sorted(judge, key=lambda c: f"{c.__module__}.{c.__qualname__}")]
    return list(dict.fromkeys(out))


def _resolved(cls: type) -> dict[str, object]:
    """What each name resolves to on ``cls`` through its bases (first in the MRO), callables and descriptors only."""
    out: dict[str, object] = {}
    for base in cls.__mro__:
        if base is object:
            continue
        for attr, value in list(vars(base).items()):
            if attr not in out and (callable(value) or isinstance(value, _DESCRIPTORS)):
                out[attr] = value
    return out


def _data_parts(name: str, value, objects: dict[str, object]) -> None:
    """A judge module's constant (a tolerance rule, a distribution's parameters, a table of dtypes): the value, and
    for a dict, list or set each item it holds, so that one changed in place is a change too."""
    objects[name] = value
    if isinstance(value, dict):
        for key, item in list(value.items()):
            objects[f"{name}[{key!r}]"] = item
    elif isinstance(value, (list, set)):
        for i, item in enumerate(list(value)):
            objects[f"{name}[{i}]"] = item


def _hold(name: str, value, objects: dict[str, object]) -> None:
    """``value`` under ``name``, and where it is a Python function its code and defaults beside it."""
    objects[name] = value
    _function_parts(name, value, objects)


def _class_parts(where: str, cls: type, objects: dict[str, object]) -> None:
    for attr, value in _resolved(cls).items():
        _hold(f"{where}.{attr}", value, objects)


def _function_parts(name: str, value, objects: dict[str, object]) -> None:
    """A Python function's code, defaults and keyword defaults, each held beside it."""
    for wrapper in (staticmethod, classmethod):
        if isinstance(value, wrapper):
            value = value.__func__
    if isinstance(value, property):
        for part in ("fget", "fset", "fdel"):
            if getattr(value, part) is not None:
                _function_parts(f"{name}.{part}", getattr(value, part), objects)
        return
    if isinstance(value, types.FunctionType):
        objects[f"{name}.__code__"] = value.__code__
        objects[f"{name}.__defaults__"] = value.__defaults__
        objects[f"{name}.__kwdefaults__"] = value.__kwdefaults__


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
        "torch function modes in force": torch._C._len_torch_function_stack(),
        **_cuda_state(),
        "torch dispatch modes in force": _dispatch_modes(),
        "an interval timer armed": any(signal.getitimer(t) != (0.0, 0.0)
                                       for t in (signal.ITIMER_REAL, signal.ITIMER_VIRTUAL, signal.ITIMER_PROF)),
        **{f"the handler of {sig.name}": _handler(sig) for sig in signal.valid_signals()
           if isinstance(sig, signal.Signals) and sig not in (signal.SIGKILL, signal.SIGSTOP)},
    }


def _cuda_state() -> dict[str, str]:
    """The stream eager and the timer run on, and whether a synchronisation warns or raises; nothing before PyTorch
    has started CUDA in this process (it starts it lazily)."""
    import torch

    if not (torch.cuda.is_available() and torch.cuda.is_initialized()):
        return {}
    return {"the current CUDA stream": repr(torch.cuda.current_stream()),
            "torch.cuda.get_sync_debug_mode()": str(torch.cuda.get_sync_debug_mode())}


def _dispatch_modes() -> int:
    try:
        from torch.utils._python_dispatch import _len_torch_dispatch_stack
    except ImportError:   # a PyTorch without it: counted as none
        return 0
    return _len_torch_dispatch_stack()


def _handler(sig) -> str:
    """A signal's handler, named (a Python handler by its identity: one set anew is a change)."""
    h = signal.getsignal(sig)
    if h is None or isinstance(h, int):
        return repr(h)
    return f"{getattr(h, '__qualname__', type(h).__name__)} at {id(h):#x}"


def _dispatch_tables() -> dict[str, str]:
    """Every ``aten`` operator's dispatch table (which kernel serves each dispatch key, and where it was registered):
    a kernel registered over one, from Python or from C++ (an extension's ``TORCH_LIBRARY_IMPL(aten, ...)``), changes
    its table."""
    import torch

    return {name: torch._C._dispatch_dump_table(name) for name in torch._C._dispatch_get_all_op_names()
            if name.startswith("aten::")}


def _table_changes(before: dict[str, str], now: dict[str, str]) -> list[str]:
    out = []
    for op, table in before.items():
        if now.get(op, table) == table:
            continue
        old = set(table.splitlines())
        keys = [line.split(":", 1)[0] for line in now[op].splitlines() if line not in old]
        out.append(f"a kernel of its own registered for {op} on {', '.join(keys) or 'a key'} (its dispatch table)")
    return out


def _problem_parts(problem, objects: dict[str, object]) -> None:
    for attr in PROBLEM_STATE:
        objects[f"the problem's {attr}"] = getattr(problem, attr, None)
    for key, ns in list(problem._cache.items()):
        where = f"the problem at {dict(key) or 'its own sizes'}"
        objects[f"{where}: its namespace"] = ns
        for attr, value in list(ns.items()):
            if callable(value) or isinstance(value, types.ModuleType):
                _hold(f"{where}: {attr}", value, objects)
            if inspect.isclass(value) and value.__module__ == ns.get("__name__"):
                _class_parts(f"{where}: {attr}", value, objects)


def _modules() -> list[str]:
    for name in JUDGE:
        importlib.import_module(name)
    judge = sorted(name for name, mod in list(sys.modules.items()) if name.startswith("sandbox.") and mod is not None)
    return list(dict.fromkeys([*MODULES, *judge]))


def fingerprint(problem=None) -> tuple[dict[str, object], dict[str, object], dict[str, str]]:
    """(objects by name, settings by name, the ``aten`` operators' dispatch tables): the objects themselves are held, so that identity
    compares them (an id could be reused once an object is freed). With ``problem`` (a ``sandbox.pytorch.problem.
    Problem``), also its state and every namespace it has executed: their functions and classes (``Model``,
    ``get_inputs``, ``get_init_inputs``, helpers) as for the modules."""
    objects: dict[str, object] = {}
    if problem is not None:
        _problem_parts(problem, objects)
    for name in _modules():
        module = sys.modules.get(name) or importlib.import_module(name)
        for attr, value in list(vars(module).items()):
            if callable(value) or isinstance(value, types.ModuleType):
                _hold(f"{name}.{attr}", value, objects)
            elif name.startswith("sandbox.") and name != __name__ and not attr.startswith("__"):
                _data_parts(f"{name}.{attr}", value, objects)
    for cls in _classes():
        _class_parts(f"{cls.__module__}.{cls.__qualname__}", cls, objects)
    return objects, _settings(), _dispatch_tables()


class Watch:
    """A fingerprint taken now, and from now on the refused calls (``REFUSED``) refused; ``changes()`` names what
    differs from the fingerprint since, and every call refused. What PyTorch itself installs on its first
    ``torch.compile`` (dynamo's wrapper of ``nn.Module.__init__``) is installed first, so that it is part of the
    fingerprint rather than a change."""

    def __init__(self, problem=None):
        _compile_installed()
        self.problem = problem
        self.objects, self.settings, self.tables = fingerprint(problem)
        self.refused = _refuse()
        self.already = len(self.refused)

    def changes(self) -> list[str]:
        objects, settings, tables = fingerprint(self.problem)
        differ = [name for name, value in self.objects.items() if objects.get(name) is not value]
        whole = set(differ)
        out = [f"{name} replaced" if name in objects else f"{name} removed" for name in differ
               if name.rpartition(".")[0] not in whole]   # a function replaced: not its code again
        out += [f"{name} set to {settings.get(name)!r} (was {value!r})" for name, value in self.settings.items()
                if settings.get(name) != value]
        out += _table_changes(self.tables, tables)
        out += [f"it called {event}, which the judging process refuses"
                for event in dict.fromkeys(self.refused[self.already:])]
        return out


_refused: list[str] | None = None


def _refuse() -> list[str]:
    """The calls refused so far in this process, with the audit hook that refuses ``REFUSED`` installed (once, for
    good: no Python code can remove it, and the confined child that judges a solution judges only that one)."""
    global _refused
    if _refused is not None:
        return _refused
    record: list[str] = []
    refused = frozenset(REFUSED)

    def hook(event: str, args) -> None:
        if event in refused:
            record.append(event)
            raise RuntimeError(f"{event} is refused in the process that judges a solution")

    sys.addaudithook(hook)
    _refused = record
    return record


def _compile_installed() -> None:
    try:
        from torch._dynamo.mutation_guard import install_generation_tagging_init
    except Exception:   # a PyTorch without dynamo, or one that installs nothing there
        return
    install_generation_tagging_init()


def describe(changes: list[str]) -> str:
    """One line for the verdict."""
    more = f" (and {len(changes) - 3} more)" if len(changes) > 3 else ""
    return (f"it changed the judging process: {'; '.join(changes[:3])}{more}: the reference, the baselines, the timer "
            "and the judge's own code it relies on are no longer their own")
