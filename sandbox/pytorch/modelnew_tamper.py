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
``sys.setprofile`` and any further audit hook. It refuses the solution's own code any frame (``sys._getframe``, a
traceback's ``tb_frame``, a generator's frame, or one a library function hands back: ``inspect.stack``,
``logging.currentframe``...): from a frame, ``f_back`` reaches the judge's frames and what they hold (its tolerances,
its timing samples, this watch). Library code reading a frame on its own behalf (a namedtuple's module name, a logged
warning's caller, ``torch.compile``) is let through. And it refuses the solution a code object under a library's file
name (``compile``, ``CodeType``, ``marshal.loads``), which would pass for library code. A refused call raises
``RuntimeError`` where it was made, and is named as a change.

The watch's own check is sealed (``_sealed``): copies of its functions and of the builtins, taken before the solution
runs, under a namespace of their own, which the judge holds in its frames only. Replacing ``Watch.changes``, this
module's ``fingerprint`` or a builtin changes what is watched, and is seen; it does not change the watching. The
settings are read through PyTorch's C getters and ``_signal``'s functions, taken at the same time, never through
Python wrappers a solution could replace.

Besides the full check after the module ran, after the correctness stage and after the timing, the judge runs the
watch's quick ``guard`` as soon as any of the solution's code returns (each call, its constructor, its ``to`` and
parameters, the census), and before the steps a finalizer of the solution's (run when the judge drops an output or
a module) could precede (each call, building a size's modules, the comparisons, every timed call): a change that puts itself back later (a replaced ``torch`` function or judge function
that restores the original once it has been used) is seen before the judge uses it.

Not reached: on Python 3.11 (where starting a thread is no audit event), a thread the solution leaves running, which
can make and undo a change between two of the judge's looks (from 3.12 on, a thread started while its code runs is
refused); native code writing the process's own memory (ctypes, or its extension's own C++); a library function that
hands its caller a frame and is not in ``GIVERS``; and code that the import system itself compiles under a
library's file name from a loader the solution wrote. A time
below the hardware's floor is flagged by ``sandbox.host.floor`` whatever produced it.
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


def _held(value) -> bool:
    """Whether a module's or namespace's name is held in the fingerprint by what it holds: a function, a class, a
    module."""
    return callable(value) or isinstance(value, types.ModuleType)


def _member(value) -> bool:
    """Whether a class's name is held in the fingerprint: callables and descriptors."""
    return callable(value) or isinstance(value, _DESCRIPTORS)


def _resolved(cls: type) -> dict[str, object]:
    """What each name resolves to on ``cls`` through its bases (first in the MRO), callables and descriptors only."""
    out: dict[str, object] = {}
    for base in cls.__mro__:
        if base is object:
            continue
        for attr, value in list(vars(base).items()):
            if attr not in out and _member(value):
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


def _readers() -> dict[str, object]:
    """{setting: a function of no arguments that reads it}, taken now: PyTorch's C getters and the ``_signal``
    module's own functions, not the Python wrappers a solution could replace to report the old value. The settings
    are those under which eager and the reference would run slower or differently (the matrix-product and linear
    algebra libraries preferred, attention's fused kernels turned off, SMs carved out of matrix products). TF32 and cuDNN's autotuner are
    not among them: a solution may turn them on for its own layers, eager and compile run with TF32 as the judgement
    says whatever they are (``runtime.tf32``), and the autotuner only makes eager faster."""
    import _signal
    import functools

    import torch

    C = torch._C
    out = {
        "torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction":
            C._get_cublas_allow_fp16_reduced_precision_reduction,
        "torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction":
            C._get_cublas_allow_bf16_reduced_precision_reduction,
        "torch.backends.cudnn.enabled": C._get_cudnn_enabled,
        "torch.backends.cudnn.deterministic": C._get_cudnn_deterministic,
        "torch.are_deterministic_algorithms_enabled()": C._get_deterministic_algorithms,
        "torch.get_default_dtype()": torch.get_default_dtype,
        "torch.get_num_threads()": C.get_num_threads if hasattr(C, "get_num_threads") else torch.get_num_threads,
        "torch function modes in force": C._len_torch_function_stack,
        "torch dispatch modes in force": getattr(C, "_len_torch_dispatch_stack", lambda: 0),
        "the current CUDA stream": functools.partial(_cuda_stream, torch),
        "torch.cuda.get_sync_debug_mode()": functools.partial(_sync_debug, torch),
        "an interval timer armed": functools.partial(_timers, _signal.getitimer),
    }
    for getter, name in (("_get_blas_preferred_backend", "torch.backends.cuda.preferred_blas_library()"),
                         ("_get_linalg_preferred_backend", "torch.backends.cuda.preferred_linalg_library()"),
                         ("_get_mkldnn_enabled", "torch.backends.mkldnn.enabled"),
                         ("_get_cublas_allow_fp16_accumulation", "torch.backends.cuda.matmul.allow_fp16_accumulation"),
                         ("_get_flash_sdp_enabled", "torch.backends.cuda.flash_sdp_enabled()"),
                         ("_get_mem_efficient_sdp_enabled", "torch.backends.cuda.mem_efficient_sdp_enabled()"),
                         ("_get_cudnn_sdp_enabled", "torch.backends.cuda.cudnn_sdp_enabled()"),
                         ("_get_math_sdp_enabled", "torch.backends.cuda.math_sdp_enabled()"),
                         ("_get_sm_carveout_experimental", "the SMs carved out of PyTorch's matrix products")):
        if hasattr(C, getter):   # a PyTorch without it: a setting it does not have
            out[name] = getattr(C, getter)
    for sig in signal.valid_signals():
        if isinstance(sig, signal.Signals) and sig not in (signal.SIGKILL, signal.SIGSTOP):
            out[f"the handler of {sig.name}"] = functools.partial(_handler, _signal.getsignal, int(sig))
    return out


def _settings(readers: dict | None = None) -> dict[str, object]:
    return {name: read() for name, read in (readers or _readers()).items()}


def _cuda_stream(torch) -> str | None:
    """The stream eager and the timer run on; None before PyTorch has started CUDA in this process (it starts it
    lazily), which is never compared."""
    if not (torch.cuda.is_available() and torch.cuda.is_initialized()):
        return None
    read = getattr(torch._C, "_cuda_getCurrentStream", None)
    return repr(read(torch.cuda.current_device())) if read else repr(torch.cuda.current_stream())


def _sync_debug(torch) -> str | None:
    """Whether a synchronisation warns or raises (None before CUDA is started)."""
    if not (torch.cuda.is_available() and torch.cuda.is_initialized()):
        return None
    read = getattr(torch._C, "_cuda_get_sync_debug_mode", None)
    return str(read() if read else torch.cuda.get_sync_debug_mode())


def _timers(getitimer) -> bool:
    return any(getitimer(t) != (0.0, 0.0) for t in (signal.ITIMER_REAL, signal.ITIMER_VIRTUAL, signal.ITIMER_PROF))


def _handler(getsignal, sig: int) -> str:
    """A signal's handler, named (a Python handler by its identity: one set anew is a change)."""
    h = getsignal(sig)
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
            if _held(value):
                _hold(f"{where}: {attr}", value, objects)
            if inspect.isclass(value) and value.__module__ == ns.get("__name__"):
                _class_parts(f"{where}: {attr}", value, objects)


def _modules() -> list[str]:
    for name in JUDGE:
        importlib.import_module(name)
    judge = sorted(name for name, mod in list(sys.modules.items()) if name.startswith("sandbox.") and mod is not None)
    return list(dict.fromkeys([*MODULES, *judge]))


def _module_objects() -> dict[str, types.ModuleType]:
    """The modules watched, by name, as objects taken now: a module later put in ``sys.modules`` in place of one
    (with the old attributes, while the real one is changed) is a change, not what is looked at."""
    return {name: sys.modules.get(name) or importlib.import_module(name) for name in _modules()}


def fingerprint(problem=None, modules: dict | None = None,
                readers: dict | None = None) -> tuple[dict[str, object], dict[str, object], dict[str, str]]:
    """(objects by name, settings by name, the ``aten`` operators' dispatch tables): the objects themselves are held,
    so that identity compares them (an id could be reused once an object is freed). With ``problem`` (a
    ``sandbox.pytorch.problem.Problem``), also its state and every namespace it has executed: their functions and
    classes (``Model``, ``get_inputs``, ``get_init_inputs``, helpers) as for the modules. ``modules`` and
    ``readers``: those taken when the watch was made (``_module_objects``, ``_readers``)."""
    objects: dict[str, object] = {}
    if problem is not None:
        _problem_parts(problem, objects)
    for name, module in (modules or _module_objects()).items():
        objects[f"sys.modules[{name!r}]"] = sys.modules.get(name)
        for attr, value in list(vars(module).items()):
            if _held(value):
                _hold(f"{name}.{attr}", value, objects)
            elif name.startswith("sandbox.") and name != __name__ and not attr.startswith("__"):
                _data_parts(f"{name}.{attr}", value, objects)
    for cls in _classes():
        _class_parts(f"{cls.__module__}.{cls.__qualname__}", cls, objects)
    return objects, _settings(readers), _dispatch_tables()


class Tampered(Exception):
    """Raised by a watch's ``guard`` where the solution changed what the judgement relies on during the code of its
    that just ran."""


class Watch:
    """A fingerprint taken now, and from now on the refused calls refused (``_refuse``); ``check()`` names what
    differs from the fingerprint since, every call refused, and all ``guard`` found. What PyTorch itself installs on
    its first ``torch.compile`` (dynamo's wrapper of ``nn.Module.__init__``) is installed first, so that it is part
    of the fingerprint rather than a change.

    ``guard()`` is the quick form, run by the judge as soon as any of the solution's code returns (a call, its
    constructor, its module's methods), before the judge uses anything: every name of the watched modules, of the
    problem's namespaces and of the watched classes and their bases still holds the object it held (by identity, in
    a few milliseconds), the settings are as they were and nothing was refused; else ``Tampered``. A change the
    solution makes and undoes itself later (a replaced ``torch`` function that puts the original back once the
    reference has used it) is seen before it is used. Assigning a library function's ``__code__`` or defaults is
    refused outright (``_refuse``), so that no change escapes identity.

    ``check`` and ``guard`` are sealed closures (``_sealed``): their code, the functions they call and the builtins
    they use are copies taken now, under a namespace of their own, so that replacing this module's functions,
    ``Watch``'s methods or a builtin afterwards changes what is watched (and is seen), never the watching."""

    def __init__(self, problem=None):
        _compile_installed()
        modules, readers = _module_objects(), _readers()
        objects, settings, tables = fingerprint(problem, modules, readers)
        refused = _refuse(_roots_of(problem))
        spaces = _namespaces(problem, modules)
        self.check, self.guard = _sealed(sys.modules[__name__])["_checker"](
            problem, modules, readers, objects, settings, tables, refused, len(refused), spaces)

    def changes(self) -> list[str]:
        return self.check()


def _namespaces(problem, modules: dict) -> list[tuple[str, object, list, list]]:
    """(label, namespace, its names, the objects they hold) for every watched module, every namespace the problem
    has executed, and every class ``_classes`` watches with its bases: what ``guard`` compares by identity. The names
    are those ``fingerprint`` holds: functions, classes and modules everywhere, and the judge's constants."""
    spaces = []
    for name, module in modules.items():
        data = name.startswith("sandbox.") and name != __name__
        spaces.append((name, vars(module),
                       lambda attr, value, data=data: _held(value) or (data and not attr.startswith("__"))))
    if problem is not None:
        spaces += [(f"the problem at {dict(key) or 'its own sizes'}", ns,
                    lambda attr, value: _held(value))
                   for key, ns in list(problem._cache.items())]
    seen: set[int] = set()
    for cls in _classes():
        for base in cls.__mro__:
            if base is not object and id(base) not in seen:
                seen.add(id(base))
                spaces.append((f"{base.__module__}.{base.__qualname__}", vars(base),
                               lambda attr, value: _member(value)))
    out = []
    for label, ns, kept in spaces:
        names = [attr for attr, value in list(ns.items()) if kept(attr, value)]
        out.append((label, ns, names, list(map(ns.get, names))))
    return out


def _checker(problem, modules, readers, objects, settings, tables, refused, already, spaces):
    """(``changes()``, ``guard()``): ``changes`` names what differs from the fingerprint ``objects``, ``settings``,
    ``tables`` now, the calls refused since (``refused[already:]``) and what ``guard`` found; ``guard`` compares
    ``spaces`` (``_namespaces``) by identity, the settings and the refused calls, and raises ``Tampered``."""
    found: list[str] = []
    ids = [list(map(id, values)) for _, _, _, values in spaces]

    def changes() -> list[str]:
        now, now_settings, now_tables = fingerprint(problem, modules, readers)
        differ = [name for name, value in objects.items() if now.get(name) is not value]
        whole = set(differ)
        out = list(found)
        out += [f"{name} replaced" if name in now else f"{name} removed" for name in differ
                if name.rpartition(".")[0] not in whole]   # a function replaced: not its code again
        out += _table_changes(tables, now_tables)
        out += _since(settings, now_settings, refused[already:])
        return list(dict.fromkeys(out))

    def guard() -> None:
        out = []
        for (label, ns, names, values), before in zip(spaces, ids):
            if list(map(id, map(ns.get, names))) != before:
                out += [f"{label}.{name} replaced" if name in ns else f"{label}.{name} removed"
                        for name, value in zip(names, values) if ns.get(name) is not value]
        out += _since(settings, _settings(readers), refused[already:])
        if out:
            found.extend(out)
            raise Tampered(describe(out))
    return changes, guard


def _since(settings: dict, now: dict, refused: list[str]) -> list[str]:
    """The settings changed since ``settings`` were read (one read as None, before CUDA started, is not compared),
    and the calls refused."""
    out = [f"{name} set to {now.get(name)!r} (was {value!r})" for name, value in settings.items()
           if value is not None and now.get(name) != value]
    return out + [f"it called {event}, which the judging process refuses" for event in dict.fromkeys(refused)]


def _sealed(module: types.ModuleType) -> dict:
    """A private copy of ``module``'s namespace in which every function defined in it is a copy bound to that
    namespace, and ``__builtins__`` a copy of the builtins as they are now: calling through it runs no function a
    later assignment to the module, or to ``builtins``, put in place."""
    import builtins

    ns = dict(vars(module))
    ns["__builtins__"] = dict(vars(builtins))
    for name, value in list(ns.items()):
        if isinstance(value, types.FunctionType) and value.__module__ == module.__name__:
            copy = types.FunctionType(value.__code__, ns, value.__name__, value.__defaults__, value.__closure__)
            copy.__kwdefaults__ = value.__kwdefaults__
            ns[name] = copy
    return ns


def _roots_of(problem) -> tuple[str, ...]:
    """The problem's own folder, whose code (``Model``) is trusted as the task's."""
    import os

    path = getattr(problem, "path", None)
    return (os.path.dirname(os.path.realpath(str(path))) + "/",) if path else ()


_refused: list[str] | None = None

# functions that hand their caller a frame, or what a frame's locals hold: the code that called them is the one asking
GIVERS = {("inspect", "currentframe"), ("inspect", "stack"), ("inspect", "trace"), ("inspect", "getouterframes"),
          ("inspect", "getinnerframes"), ("traceback", "walk_stack"), ("traceback", "walk_tb"),
          ("logging", "<lambda>"), ("torch._jit_internal", "createResolutionCallbackFromFrame")}
FRAME_ATTRS = frozenset(("tb_frame", "gi_frame", "cr_frame", "ag_frame"))
SWAPPED = frozenset(("__code__", "__defaults__", "__kwdefaults__"))
THREAD_STARTS = frozenset(("_thread.start_new_thread", "_thread.start_joinable_thread"))


def _refuse(roots: tuple[str, ...] = ()) -> list[str]:
    """The calls refused so far in this process, with the audit hook that refuses them installed (once, for good: no
    Python code can remove it, and the confined child that judges a solution judges only that one).

    Refused: ``REFUSED`` from anyone; and to the solution (its own code, or code it compiled) a frame:
    ``sys._getframe``, a traceback's ``tb_frame``, a generator's or coroutine's frame, or one handed over by a
    library function that returns frames or a frame's locals (``GIVERS``: ``inspect.currentframe`` and
    ``inspect.stack``, ``traceback.walk_stack``, ``logging.currentframe``, ...), which counts as its caller's own
    request. From a frame, ``f_back`` reaches every frame of the judge below it and their locals (its tolerances, its
    timing samples, this watch). Library code asking for a frame for itself (PyTorch names a custom operator's
    source line, ``torch.compile`` reads the frame it compiles) is let through. Refused too: a code object the
    solution makes under a file name outside its own (``compile``, ``CodeType``, ``marshal.loads``), which would pass
    for library code, and its assigning a library function's ``__code__``, ``__defaults__`` or ``__kwdefaults__`` (a
    function that stays the same object while its code changes, and can be changed back), and a thread started while
    its code is on the stack (which could change what the judge relies on, and undo it, between two of the judge's
    looks; a library that starts one on its behalf, as ``tqdm``'s monitor, goes on without it). ``roots``: folders whose code is trusted besides the library's (the problem's)."""
    global _refused
    if _refused is not None:
        return _refused
    record: list[str] = []
    refused = frozenset(REFUSED)
    getframe, roots = sys._getframe, (*_trusted_roots(), *roots)
    files = {m: _module_file(m) for m, _ in GIVERS}
    givers = {(files[m], name) for m, name in GIVERS if files[m]}
    known: dict[str, bool] = {}
    busy = [False]

    def untrusted(filename) -> bool:
        if filename not in known:
            name = filename if isinstance(filename, str) else str(filename)
            known[filename] = not (name.startswith("<frozen ") or any(name.startswith(r) for r in roots))
        return known[filename]

    def asked_by(frame):
        while frame is not None and (frame.f_code.co_filename, frame.f_code.co_name) in givers:
            frame = frame.f_back
        return frame

    def frame_refused(event: str) -> str:
        asker = asked_by(getframe(2))
        if asker is None:
            return ""
        code = asker.f_code
        if untrusted(code.co_filename):
            return f"{event} (a frame, from {code.co_filename}:{asker.f_lineno})"
        return ""

    def forging_refused(event: str, args) -> str:
        asker = getframe(2)
        if asker is None or not untrusted(asker.f_code.co_filename):
            return ""
        if event == "marshal.loads":
            return f"{event} (from {asker.f_code.co_filename}:{asker.f_lineno})"
        filename = args[1] if len(args) > 1 else None
        if isinstance(filename, bytes):
            filename = filename.decode("utf-8", "replace")
        if isinstance(filename, str) and not untrusted(filename):
            return f"{event} of code named {filename!r} (from {asker.f_code.co_filename}:{asker.f_lineno})"
        return ""

    def swap_refused(args) -> str:
        """A library function's code or defaults assigned by the solution (its own functions' are its own)."""
        target, name = args[0], args[1]
        code = getattr(target, "__code__", None) if isinstance(target, types.FunctionType) else None
        asker = getframe(2)
        if code is None or untrusted(code.co_filename) or asker is None or not untrusted(asker.f_code.co_filename):
            return ""
        return (f"object.__setattr__ of {name} on {code.co_filename}:{code.co_name} (from "
                f"{asker.f_code.co_filename}:{asker.f_lineno})")

    def thread_refused(event: str) -> str:
        """A thread started while the solution's code is on the stack (by it, or by a library on its behalf): it
        could change what the judge relies on, and undo it, between two of the judge's looks."""
        f = getframe(2)
        while f is not None:
            if untrusted(f.f_code.co_filename):
                return f"{event} (a thread, started while {f.f_code.co_filename}:{f.f_lineno} ran)"
            f = f.f_back
        return ""

    def hook(event: str, args) -> None:
        if event in refused:
            record.append(event)
            raise RuntimeError(f"{event} is refused in the process that judges a solution")
        if busy[0]:
            return
        frames = event == "sys._getframe" or (event == "object.__getattr__" and len(args) > 1
                                               and args[1] in FRAME_ATTRS)
        swap = event == "object.__setattr__" and len(args) > 1 and args[1] in SWAPPED
        thread = event in THREAD_STARTS
        if not (frames or swap or thread) and event not in ("compile", "code.__new__", "marshal.loads"):
            return
        busy[0] = True
        try:
            why = (frame_refused(event) if frames else swap_refused(args) if swap else
                   thread_refused(event) if thread else forging_refused(event, args))
        finally:
            busy[0] = False
        if why:
            record.append(why)
            raise RuntimeError(f"{why.split(' (')[0]} is refused to the solution in the process that judges it")

    sys.addaudithook(hook)
    _refused = record
    return record


def _module_file(name: str) -> str | None:
    try:
        return importlib.import_module(name).__file__
    except Exception:   # torch without that module: nothing of it to hand a frame over
        return None


def _trusted_roots() -> tuple[str, ...]:
    """Where library code lives: Python's own folders, its site folders and every absolute folder on ``sys.path``
    (which the problem's task folder and the judge's own package are reached through), less the call's home (where
    the solution's builds and caches are). Code from anywhere else (the solution's ``solution_*.py``, code compiled
    from a string) is the solution's."""
    import os
    import site
    import sysconfig

    home = os.path.realpath(os.environ.get("HOME", "/nonexistent"))
    found = [sys.prefix, sys.base_prefix, sys.exec_prefix, *sysconfig.get_paths().values(),
             *getattr(site, "getsitepackages", lambda: [])(), *[p for p in sys.path if os.path.isabs(p)]]
    out = []
    for path in found:
        real = os.path.realpath(path)
        if real in ("/", "") or home.startswith(real.rstrip("/") + "/") or real.startswith(home):
            continue
        out += [real.rstrip("/") + "/", path.rstrip("/") + "/"]
    return tuple(dict.fromkeys(out))


def _compile_installed() -> None:
    try:
        from torch._dynamo.mutation_guard import install_generation_tagging_init
    except Exception:   # a PyTorch without dynamo, or one that installs nothing there
        return
    install_generation_tagging_init()


def describe(changes: list[str]) -> str:
    """One line for the verdict."""
    more = f" (and {len(changes) - 3} more)" if len(changes) > 3 else ""
    if all(c.startswith("it called ") for c in changes):   # refused where asked: nothing was changed
        return (f"it asked the judging process for what it refuses: {'; '.join(changes[:3])}{more}: a solution "
                "that reaches for the judge's frames, heap or code is not judged further")
    return (f"it changed the judging process: {'; '.join(changes[:3])}{more}: the reference, the baselines, the timer "
            "and the judge's own code it relies on are no longer their own")
