"""The options of a run, declared once: ``kernelwright optimize`` and ``batch`` take them (``agent.cli.options`` makes
their command-line options from this table), ``RunOptions.overrides`` turns the ones given into run config fields,
and ``agent.launch`` reads the few that decide whether the GPU sandbox's workers start early.

This module imports neither typer nor the rest of the program: the entry point reads it before anything else.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

MODEL, BUDGET, SANDBOX, OUTPUT = "Model", "Budget", "Sandbox", "Output"   # the --help panels


class OptionError(ValueError):
    """An option's value that the run config cannot take; the message names the flag."""


@dataclass(frozen=True)
class RunOption:
    name: str                     # the parameter's name
    kind: type                    # str, int, float, bool (a flag) or Path
    help: str
    panel: str | None = None      # the --help panel it is listed in; None: "Options"
    key: str | None = None        # where its value goes in the run config, dotted; None: not a config field
    default: Any = None
    choices: tuple[str, ...] = ()  # the values it takes, where they are few (as the sandbox's config names them)
    sets: Any = None              # a flag's value at ``key`` when it is given
    flag_name: str | None = None  # the flag, where it is not the name's

    @property
    def flag(self) -> str:
        return self.flag_name or "--" + self.name.replace("_", "-")


OPTIONS: tuple[RunOption, ...] = (
    RunOption("model", str, "Model name on the endpoint; none: the built-in search over knobs and flags.", MODEL,
              "model.name"),
    RunOption("base_url", str, "OpenAI-compatible endpoint, e.g. http://localhost:8000/v1 (default: OPENAI_BASE_URL).",
              MODEL, "model.base_url"),
    RunOption("api_key_env", str, "Environment variable holding the API key (default OPENAI_API_KEY; local servers "
                                  "need none).", MODEL, "model.api_key_env"),
    RunOption("temperature", float, "Sampling temperature.", MODEL, "model.temperature"),
    RunOption("max_tokens", int, "Completion budget per request.", MODEL, "model.max_tokens"),
    RunOption("price_in", float, "USD per million prompt tokens of this model.", MODEL),    # with --price-out: prices
    RunOption("price_out", float, "USD per million completion tokens of this model.", MODEL),
    RunOption("parallel", int, "Model requests in flight at once (one GPU evaluates one candidate at a time; on a "
                               "cluster of N GPUs at least N + 1).", MODEL, "parallel"),
    RunOption("iterations", int, "Model requests in the model phase (default 10).", BUDGET, "budget.iterations"),
    RunOption("budget_tokens", int, "Stop after this many prompt + completion tokens.", BUDGET, "budget.tokens"),
    RunOption("budget_usd", float, "Stop after spending this many US dollars (needs the model's price).", BUDGET,
              "budget.usd"),
    RunOption("budget_gpu_s", float, "Stop after this many GPU-seconds of checking and timing.", BUDGET,
              "budget.gpu_seconds"),
    RunOption("budget_wall_s", float, "Stop after this many seconds of wall time.", BUDGET, "budget.wall_seconds"),
    RunOption("plateau", int, "Stop after this many timed candidates in a row without a 1% gain.", BUDGET,
              "budget.plateau"),
    RunOption("no_tune", bool, "Do not sweep the winner's knobs and flags after a model-driven run.", BUDGET,
              "tune.enabled", default=False, sets=False),
    RunOption("no_sanitize", bool, "Do not run compute-sanitizer (memcheck, racecheck) on the winner before "
                                   "declaring it.", SANDBOX, "sanitize.enabled", default=False, sets=False),
    RunOption("sandbox", str, "auto, gpu, compile-only (real compiles, no timing) or fake (simulated timings).",
              SANDBOX, "sandbox", choices=("auto", "gpu", "compile-only", "fake")),
    RunOption("torch_tf32", str, "TF32 in the PyTorch eager and torch.compile baselines as they are timed: off "
                                 "(default; float32 arithmetic), default (PyTorch's defaults: cuDNN convolutions in "
                                 "TF32, as KernelBench times eager) or on. The candidate's tolerance is the same.",
              SANDBOX, "sandbox_options.torch_tf32", choices=("off", "default", "on")),
    RunOption("ray", bool, "Spread GPU evaluations over a Ray cluster, one sandbox actor per GPU (the ray extra); the "
                           "cluster is [cluster] of --config, else a Ray instance started on this machine.", SANDBOX,
              "cluster", default=False, sets={}),
    RunOption("ray_address", str, "The Ray cluster to join (implies --ray): auto (ray start ran here), "
                                  "ray://HOST:10001 or HOST:6379.", SANDBOX, "cluster.address"),
    RunOption("ray_gpus", int, "At most this many GPUs of the cluster (implies --ray); with --sandbox fake, the fake "
                               "GPUs a local instance declares.", SANDBOX, "cluster.gpus"),
    RunOption("config", Path, "Run config file (TOML): model, prices, budget, selection, tune, sandbox."),
    RunOption("traces", Path, "Folder of run traces (one folder per run).", OUTPUT, default=Path("traces")),
    RunOption("quiet", bool, "No live progress; only the final table.", OUTPUT, default=False),
    RunOption("as_json", bool, "Print the summary as JSON instead of tables (with the screened configurations and why "
                               "each other timed candidate is not the winner).", OUTPUT, default=False,
              flag_name="--json"),
)
BY_NAME = {o.name: o for o in OPTIONS}


class RunOptions:
    """The run options a command received, by name (``opts.model``, ``opts.traces``, ...)."""

    def __init__(self, **values: Any):
        unknown = set(values) - set(BY_NAME)
        if unknown:
            raise TypeError(f"not run options: {', '.join(sorted(unknown))}")
        self._values = {o.name: values.get(o.name, o.default) for o in OPTIONS}

    def __getattr__(self, name: str) -> Any:
        try:
            return self.__dict__["_values"][name]
        except KeyError:
            raise AttributeError(name) from None

    def overrides(self, file_model: str | None = None) -> dict:
        """Config fields set on the command line (only those given). ``file_model``: the config file's model name,
        which --price-in and --price-out price where --model is not given."""
        out: dict[str, Any] = {}
        for o in OPTIONS:
            value = self._values[o.name]
            if o.key is None or value is None or value is False:
                continue
            if o.choices and value not in o.choices:
                raise OptionError(f"{o.flag}: expected one of {', '.join(o.choices)}, got {value!r}")
            _put(out, o.key, o.sets if o.kind is bool else value)
        if self.price_in is not None or self.price_out is not None:
            name = self.model or file_model
            if not name or self.price_in is None or self.price_out is None:
                raise OptionError("--price-in and --price-out go together, with a model (--model or model.name)")
            out["prices"] = {name: {"input_per_mtok": self.price_in, "output_per_mtok": self.price_out}}
        return out


def _put(out: dict, key: str, value: Any) -> None:
    *sections, last = key.split(".")
    for s in sections:
        out = out.setdefault(s, {})
    if isinstance(value, dict):
        out.setdefault(last, {}).update(value)
    else:
        out[last] = value


# ---- the command line before the program is imported (agent.launch) ------------------------------------------


def given(args: list[str], option: RunOption) -> str | bool | None:
    """``option``'s value in ``args`` (``--flag VALUE`` or ``--flag=VALUE``, the last one given; a flag's True), else
    None."""
    value = None
    for i, a in enumerate(args):
        if option.kind is bool and a == option.flag:
            value = True
        elif a == option.flag:
            value = args[i + 1] if i + 1 < len(args) else ""
        elif a.startswith(option.flag + "="):
            value = a.split("=", 1)[1]
    return value


def on_a_cluster(args: list[str]) -> bool:
    """Whether ``args`` name a Ray cluster (an option whose config key is ``cluster`` or under it)."""
    return any(given(args, o) is not None for o in OPTIONS if o.key and o.key.split(".")[0] == "cluster")
