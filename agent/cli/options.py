"""Arguments and options that several commands share, declared once as ``Annotated`` aliases. Each option sits in
one of the --help panels: model, budget, sandbox, output (the rest stay under "Options")."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

MODEL, BUDGET, SANDBOX, OUTPUT = "Model", "Budget", "Sandbox", "Output"


def _option(name: str, help: str, panel: str | None = None, kind=Optional[str]):
    return Annotated[kind, typer.Option(name, help=help, rich_help_panel=panel)]


def _json_mode(ctx: typer.Context, value: bool) -> bool:
    """With --json, stdout carries the JSON alone (or nothing, where the command stops before it has any): what a
    command prints for people goes to stderr, until the command ends."""
    from .app import console

    if value:
        console.stderr = True
        ctx.call_on_close(lambda: setattr(console, "stderr", False))
    return value


def json_flag(help: str):
    """``--json`` with what it prints (each command prints its own record)."""
    return Annotated[bool, typer.Option("--json", help=help, rich_help_panel=OUTPUT, callback=_json_mode)]


TaskArg = Annotated[str, typer.Argument(help="Suite task name or path to a task folder.")]
RunArg = Annotated[str, typer.Argument(help="Run id under --traces, or the path to a run folder.")]

# model
Model = _option("--model", "Model name on the endpoint; none: the built-in search over knobs and flags.", MODEL)
BaseUrl = _option("--base-url", "OpenAI-compatible endpoint, e.g. http://localhost:8000/v1 (default: OPENAI_BASE_URL).",
                  MODEL)
ApiKeyEnv = _option("--api-key-env", "Environment variable holding the API key (default OPENAI_API_KEY; local servers "
                                     "need none).", MODEL)
Temperature = _option("--temperature", "Sampling temperature.", MODEL, Optional[float])
MaxTokens = _option("--max-tokens", "Completion budget per request.", MODEL, Optional[int])
PriceIn = _option("--price-in", "USD per million prompt tokens of this model.", MODEL, Optional[float])
PriceOut = _option("--price-out", "USD per million completion tokens of this model.", MODEL, Optional[float])
Parallel = _option("--parallel", "Model requests in flight at once (one GPU evaluates one candidate at a time; on a "
                                "cluster of N GPUs at least N + 1).", MODEL,
                   Optional[int])

# budget
Iterations = _option("--iterations", "Model requests in the model phase (default 10).", BUDGET, Optional[int])
BudgetTokens = _option("--budget-tokens", "Stop after this many prompt + completion tokens.", BUDGET, Optional[int])
BudgetUsd = _option("--budget-usd", "Stop after spending this many US dollars (needs the model's price).", BUDGET,
                    Optional[float])
BudgetGpuS = _option("--budget-gpu-s", "Stop after this many GPU-seconds of checking and timing.", BUDGET, Optional[float])
BudgetWallS = _option("--budget-wall-s", "Stop after this many seconds of wall time.", BUDGET, Optional[float])
Plateau = _option("--plateau", "Stop after this many timed candidates in a row without a 1% gain.", BUDGET, Optional[int])
NoTune = _option("--no-tune", "Do not sweep the winner's knobs and flags after a model-driven run.", BUDGET, bool)

# sandbox
SandboxKind = _option("--sandbox", "auto, gpu, compile-only (real compiles, no timing) or fake (simulated timings).",
                      SANDBOX)
TorchTf32 = _option("--torch-tf32", "TF32 in the PyTorch eager and torch.compile baselines as they are timed: off "
                                    "(default; float32 arithmetic), default (PyTorch's defaults: cuDNN convolutions in "
                                    "TF32, as KernelBench times eager) or on. The candidate's tolerance is the same.",
                     SANDBOX)
NoSanitize = _option("--no-sanitize", "Do not run compute-sanitizer (memcheck, racecheck) on the winner before "
                                     "declaring it.", SANDBOX, bool)
Ray = _option("--ray", "Spread GPU evaluations over a Ray cluster, one sandbox actor per GPU (the ray extra); the "
                        "cluster is [cluster] of --config, else a Ray instance started on this machine.", SANDBOX, bool)
RayAddress = _option("--ray-address", "The Ray cluster to join (implies --ray): auto (ray start ran here), "
                                      "ray://HOST:10001 or HOST:6379.", SANDBOX)
RayGpus = _option("--ray-gpus", "At most this many GPUs of the cluster (implies --ray); with --sandbox fake, the fake "
                                "GPUs a local instance declares.", SANDBOX, Optional[int])
TimingBudget = _option("--budget", "Seconds of candidate GPU time after which timing may stop.", SANDBOX, float)
Sizes = _option("--sizes", "Time at these sizes instead of the benchmark size, e.g. n=1000000.", SANDBOX)

# output
Traces = _option("--traces", "Folder of run traces (one folder per run).", OUTPUT, Path)
Quiet = _option("--quiet", "No live progress; only the final table.", OUTPUT, bool)

# the rest
ConfigFile = _option("--config", "Run config file (TOML): model, prices, budget, selection, tune, sandbox.",
                     kind=Optional[Path])
