"""Kernel Tuner's search strategies replayed on bench/tuner.py's cached measurements.

Kernel Tuner (https://github.com/KernelTuner/kernel_tuner) can run any of its strategies in simulation
mode: every configuration is looked up in a cache file instead of being compiled and timed. This module
writes such a cache file from one bench case and replays a strategy on it, so that Kernel Tuner's
strategies and ours search the very same measured objective at the same budget.

What counts as one evaluation is made the same for both: Kernel Tuner's space is restricted to one
configuration per distinct machine code and launch plan that compiled (the one our search measures),
so configurations that compile to the same code, and those that do not compile, cost neither of them
an evaluation. A configuration whose measurement failed stays in the space and costs an evaluation in
both. The objective is our cached value: time relative to the baseline timed A/B in the same
measurement.

Needs the optional extra: ``pip install -e ".[kerneltuner]"``.
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import math
import random
import warnings
from pathlib import Path

import numpy as np

# Strategies compared by default: the random sampling the issue names, and four of Kernel Tuner's
# model-free and model-based searches.
STRATEGIES = ("random_sample", "genetic_algorithm", "simulated_annealing", "greedy_ils", "bayes_opt")
INSTALL = 'pip install -e ".[kerneltuner]"'


def version() -> str | None:
    """Kernel Tuner's version, or None where it is not installed."""
    try:
        from importlib.metadata import PackageNotFoundError
        from importlib.metadata import version as dist_version

        return dist_version("kernel_tuner")
    except PackageNotFoundError:
        return None


def _kt_key(values) -> str:
    """How Kernel Tuner keys a configuration in its cache."""
    return ",".join(str(v) for v in values)


def _native(value):
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else str(value)


class SimulatedCase:
    """One bench case as a Kernel Tuner cache file, and seeded replays of its strategies on it.

    ``run`` is a complete bench/tuner.py CaseRun (every distinct configuration measured)."""

    def __init__(self, run, folder: Path):
        self.run = run
        space = run.space
        self.names = list(space.names)
        self.tune_params = {n: [_native(c) for c in ch] for n, ch in zip(space.names, space.choices)}
        self.key_of = {}  # Kernel Tuner's key of a configuration -> our identity (sandbox.candidates.plan.identity)
        entries = {}
        for point in space.points():
            values = [self.tune_params[n][i] for n, i in zip(self.names, point)]
            kt_key = _kt_key(values)
            ours = run.key_at(point)
            entry = dict(zip(self.names, values))
            if ours is None:
                entry["time"] = "CompilationFailedConfig"
            elif math.isinf(run.value(ours)):
                entry["time"] = "RuntimeFailedConfig"
            else:
                entry.update(time=run.value(ours), compile_time=0.0, verification_time=0.0, benchmark_time=0.0)
            entries[kt_key] = entry
            if ours is not None:
                self.key_of[kt_key] = ours
        # one configuration per distinct machine code: the representative our search measures
        self.allowed = {_kt_key(self.tune_params[n][i] for n, i in zip(self.names, run.representative(k)))
                        for k in run.distinct()}
        self.cachefile = Path(folder) / f"{run.name}.json"
        self.cachefile.write_text(json.dumps(dict(
            device_name=(run.entry.get("gpu") or {}).get("gpu", "GPU"), kernel_name=run.name, problem_size=[1],
            tune_params_keys=self.names, tune_params=self.tune_params, objective="time", cache=entries)))

    def _restriction(self, params: dict) -> bool:
        return _kt_key(params[n] for n in self.names) in self.allowed

    def replay(self, strategy: str, budget: int, seed: int) -> tuple[str, int]:
        """One seeded search: (our key of the best configuration found, distinct configurations evaluated)."""
        from kernel_tuner import tune_kernel

        random.seed(seed)
        np.random.seed(seed % 2**32)
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()), _seeded_latin_hypercube(seed):
            warnings.simplefilter("ignore")
            results, _ = tune_kernel(self.run.name, "/* simulation mode: nothing is compiled */", 1, [],
                                     self.tune_params, restrictions=self._restriction, cache=str(self.cachefile),
                                     simulation_mode=True, strategy=strategy, strategy_options={"max_fevals": budget},
                                     quiet=True, verbose=False)
        seen = {}
        for r in results:
            if r is None:
                continue
            seen[_kt_key(r[n] for n in self.names)] = r["time"] if isinstance(r.get("time"), (int, float)) else float("inf")
        if not seen:
            raise RuntimeError(f"Kernel Tuner's {strategy} evaluated nothing on {self.run.name}")
        best = min(seen, key=seen.get)
        return self.key_of[best], len(seen)


@contextlib.contextmanager
def _seeded_latin_hypercube(seed: int):
    """Kernel Tuner's Latin hypercube samples (bayes_opt's initial sample) draw from a fresh, unseeded
    generator; for replays that repeat, hand the sampler the replay's seed while the search runs."""
    import inspect

    from scipy.stats import qmc

    original = qmc.LatinHypercube
    keyword = "rng" if "rng" in inspect.signature(original.__init__).parameters else "seed"
    seeded = functools.partial(original, **{keyword: seed})
    modules = [qmc]
    try:
        from kernel_tuner.strategies import bayes_opt

        modules.append(bayes_opt)
    except ImportError:  # its optional model library missing: nothing to patch there
        pass
    saved = [(m, m.LatinHypercube) for m in modules if hasattr(m, "LatinHypercube")]
    for m, _ in saved:
        m.LatinHypercube = seeded
    try:
        yield
    finally:
        for m, value in saved:
            m.LatinHypercube = value
