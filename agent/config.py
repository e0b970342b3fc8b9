"""Run configuration: validated models with one docstring per field; unknown keys fail at load time.

Precedence, lowest first: defaults, the run config file (TOML), the environment (``OPENAI_BASE_URL`` when
no base URL is set; the API key from the variable ``model.api_key_env`` names), then flags or API
arguments. The API key itself is never a field that gets written anywhere: it is read from the
environment (or passed to the Python API) and kept out of every dump.
"""

from __future__ import annotations

import ipaddress
import os
import re
import tomllib
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator, model_validator

from sandbox import SandboxConfig, SandboxKind

from .redact import REDACTED, has_redacted, redact_config, redact_url

LOCAL_PLACEHOLDER_KEY = "sk-no-key-required"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


class ConfigError(ValueError):
    """A run config that cannot be used: the message names the file or flag, the key and what was expected."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Price(_Strict):
    """What one model's tokens cost, in US dollars per million tokens."""

    input_per_mtok: float = Field(ge=0, description="Prompt tokens.")
    output_per_mtok: float = Field(ge=0, description="Completion tokens (reasoning tokens included, as APIs bill them).")
    cached_input_per_mtok: float | None = Field(None, ge=0, description="Cached prompt tokens; default: the input price.")

    def cost(self, prompt: int, completion: int, cached: int = 0) -> float:
        cached_price = self.input_per_mtok if self.cached_input_per_mtok is None else self.cached_input_per_mtok
        return ((prompt - cached) * self.input_per_mtok + cached * cached_price + completion * self.output_per_mtok) / 1e6


class ModelConfig(_Strict):
    """One OpenAI-compatible chat-completions endpoint (OpenAI, vLLM, SGLang, Ollama, llama.cpp, LiteLLM)."""

    name: str = Field(min_length=1, description="Model name as the server knows it.")
    base_url: str | None = Field(None, description="Endpoint, e.g. http://localhost:8000/v1; default: OPENAI_BASE_URL, else OpenAI.")
    api_key_env: str = Field("OPENAI_API_KEY", description="Environment variable holding the API key (local servers need none).")
    temperature: float | None = Field(0.7, ge=0, le=2, description="Sampling temperature; None: the server's default.")
    max_tokens: int | None = Field(16384, ge=1, description="Completion budget per request; None: the server's default.")
    max_tokens_field: Literal["max_tokens", "max_completion_tokens"] = Field(
        "max_tokens", description="Request field for max_tokens: OpenAI's reasoning models want max_completion_tokens.")
    reasoning_effort: str | None = Field(None, description="Passed as reasoning_effort where set (e.g. low, medium, high).")
    extra_body: dict[str, Any] = Field(default_factory=dict, description="Server-specific request fields (e.g. vLLM top_k).")
    timeout_s: float = Field(600.0, gt=0, description="Deadline of one model request, from sending it to the last byte of "
                                                      "its answer, the SDK's transport retries included.")
    max_answer_chars: int = Field(200_000, ge=1000, description="Longer answers are refused and re-asked (as a format error); "
                                                                "the trace keeps their first 2,000 characters.")
    max_retries: int = Field(2, ge=0, description="Transport retries (connection errors, 408/409/429/5xx), done by the openai SDK.")
    semantic_retries: int = Field(2, ge=0, description="Re-asks after an unusable answer (no code block, empty, truncated).")
    truncation_growth: float = Field(2.0, ge=1.0, description="max_tokens is multiplied by this when re-asking after a truncated answer.")
    answer_format: Literal["cuda", "modelnew"] = Field(
        "cuda", description="What the model answers with: cuda (a .cu candidate with its launch plan) or modelnew "
                            "(KernelBench's ModelNew module; only on a task imported from PyTorch).")
    edits: bool = Field(True, description="Offer SEARCH/REPLACE edits against the parent beside whole files (the "
                                          "prompt names both forms); false: whole files only.")
    tools: bool = Field(False, description="Tool-calling sessions: the model reads the task and lineage, compiles, "
                        "checks, times and profiles candidates with tools backed by the sandbox, then submits one "
                        "(OpenAI tools / tool_calls). An endpoint without tools support: one line, then plain requests.")
    max_tool_calls: int = Field(12, ge=1, description="Tool calls one session may make before it must submit.")
    others: dict[str, "OtherModel"] = Field(default_factory=dict, description="Further models by a name of one's "
                                            "choosing ([model.others.NAME]), each answering the requests a role "
                                            "gives it ([model.roles]).")
    roles: "RolesConfig" = Field(default_factory=lambda: RolesConfig(), description="Which model answers which request.")

    @model_validator(mode="after")
    def _roles_name_models(self) -> "ModelConfig":
        for role in ("first", "repair", "plateau"):
            name = getattr(self.roles, role)
            if name is not None and name != "main" and name not in self.others:
                known = ", ".join(["main", *self.others]) or "main"
                raise ValueError(f"roles.{role}: no model named {name!r} (known: {known}; define it as "
                                 f"[model.others.{name}])")
        return self


class RolesConfig(_Strict):
    """Which model answers which request: ``main`` is the [model] itself, other names are [model.others.NAME].
    Checked in this order for each request: repair, plateau, first; none applies: main. A model past its own
    budget hands its requests to main."""

    first: str | None = Field(None, description="The first request of a run (the baseline, or no kernel yet).")
    repair: str | None = Field(None, description="Requests that repair a candidate that failed to compile or run correctly.")
    plateau: str | None = Field(None, description="Requests after plateau_after timed candidates in a row without a gain.")
    plateau_after: int = Field(3, ge=1, description="Timed candidates in a row without improving the best (by the "
                                                    "budget's plateau_min_gain) before the plateau role answers.")


class OtherModel(ModelConfig):
    """A further endpoint named by a role: the [model] fields, plus its own price and budget."""

    price: Price | None = Field(None, description="Its token prices; needed for budget_usd and its cost in the ledger.")
    budget_usd: float | None = Field(None, ge=0, description="Money it may spend in the run; then main answers.")
    budget_tokens: int | None = Field(None, ge=0, description="Prompt plus completion tokens it may spend; then main answers.")
    budget_requests: int | None = Field(None, ge=0, description="Model requests it may make (re-asks included); then "
                                        "main answers.")

    @model_validator(mode="after")
    def _alone(self) -> "OtherModel":
        if self.others or self.roles != RolesConfig():
            raise ValueError("a model named by a role cannot name models or roles itself")
        if self.budget_usd is not None and self.price is None:
            raise ValueError(f"budget_usd of model {self.name!r} needs its price (price = {{ input_per_mtok = ..., "
                             "output_per_mtok = ... }})")
        return self


ModelConfig.model_rebuild()


class BudgetConfig(_Strict):
    """Limits of one run; whichever comes first ends it cleanly with a summary. None: no limit."""

    iterations: int | None = Field(10, ge=0, description="Proposer requests in the model phase (one request may be re-asked).")
    tokens: int | None = Field(None, ge=0, description="Prompt plus completion tokens over the whole run.")
    usd: float | None = Field(None, ge=0, description="Money spent on tokens (needs the model's price).")
    gpu_seconds: float | None = Field(None, gt=0, description="GPU-seconds spent checking, timing and profiling candidates.")
    wall_seconds: float | None = Field(None, gt=0, description="Wall time of the run, summed over resumed sessions.")
    plateau: int | None = Field(None, ge=1, description="Stop after this many timed candidates in a row that do not improve the best.")
    plateau_min_gain: float = Field(0.01, ge=0, description="Relative speedup gain that counts as an improvement for the plateau rule.")


class LineageConfig(_Strict):
    """The program database (``agent.loop.database``): how parents are picked, what else each prompt shows."""

    policy: Literal["best_explore", "islands", "archive"] = Field(
        "archive", description="Parent selection after the repair rule: archive (the best, or with probability "
        "[selection] explore the elite of another behaviour cell), best_explore (the best, or with probability explore "
        "one of the pool next best), islands (lineages grown apart, the best of each migrating to the next). archive "
        "found the best kernels in bench/results/policy.md.")
    islands: int = Field(3, ge=1, description="Islands of the islands policy; request i works on island (i-1) % islands.")
    migration_interval: int = Field(6, ge=1, description="Evaluations between migrations: each island's best is copied "
                                    "into the next island.")
    descriptors: list[Literal["roofline", "registers", "shared", "techniques"]] = Field(
        default_factory=lambda: ["roofline", "registers", "shared", "techniques"], min_length=1,
        description="Behaviour descriptors of the archive's cells: % of roofline, registers, static shared memory, "
                    "technique tags read from the source.")
    inspirations: int = Field(1, ge=0, description="Each prompt shows the k best candidates other than the parent and "
                              "the k elites most different from it (0: none).")


class SelectionConfig(_Strict):
    """How the lineage picks the parent of the next request."""

    explore: float = Field(0.2, ge=0, le=1, description="Probability of picking a good non-best candidate instead of the best.")
    pool: int = Field(4, ge=1, description="Exploration picks among this many best-ranked candidates after the best.")
    max_repairs: int = Field(2, ge=0, description="Consecutive repair attempts of a failing line before going back to the best.")
    recent_failures: int = Field(3, ge=0, description="Failed candidates shown in each prompt with their logs.")
    seed: int = Field(0, description="Seed of the exploration draws.")
    _lineage: LineageConfig | None = PrivateAttr(None)   # [lineage], handed over by RunConfig

    @property
    def database(self) -> "LineageConfig":
        """The run's [lineage] settings (the defaults for a selection made on its own)."""
        return self._lineage or LineageConfig()


class TuneConfig(_Strict):
    """The built-in search over knobs and flags (the whole run without a model; the winner's sweep after one)."""

    enabled: bool = Field(True, description="Sweep the winner's knobs and flags after a model-driven run.")
    strategy: str = Field("default", description="Search strategy of the tuner: default, bayes, random or exhaustive.")
    max_evaluations: int | None = Field(None, ge=1, description="Configurations the search may measure (screened on a GPU "
                                        "or the fake sandbox, else evaluated in full); None: its own default.")
    finalists: int = Field(3, ge=1, description="The best screened configurations evaluated in full (every check size, "
                           "the full timing protocol) after the search; only those can win.")
    seed: int = Field(0, description="Seed of the tuner's random choices.")
    flags: bool = Field(True, description="Search the NVRTC option catalogue as well as the kernel's knobs (false: "
                        "the knobs only, the space the kernel declares).")

    @field_validator("strategy")
    @classmethod
    def _known_strategy(cls, value: str) -> str:
        from .tune.strategies import STRATEGIES

        if value not in STRATEGIES:
            raise ValueError(f"unknown search strategy {value!r} (expected one of: {', '.join(STRATEGIES)})")
        return value


class SanitizeConfig(_Strict):
    """compute-sanitizer on the winner before it is declared (GPU sandbox with compute-sanitizer)."""

    enabled: bool = Field(True, description="Sanitize the winner; one with errors is rejected and the next best is sanitized.")
    tools: list[Literal["memcheck", "racecheck", "initcheck", "synccheck"]] = Field(
        default_factory=lambda: ["memcheck", "racecheck"], min_length=1, description="compute-sanitizer tools to run.")
    check_sizes: int = Field(2, ge=1, description="How many of the task's smallest non-trivial check sizes to run at.")
    timeout_s: float = Field(300.0, gt=0, description="Wall-clock limit of each tool's run.")
    max_candidates: int = Field(3, ge=1, description="Winners sanitized at most, one after another, when each has errors.")


class ClusterConfig(_Strict):
    """GPU evaluations spread over a Ray cluster (``--ray``; the ``ray`` extra): one sandbox actor per GPU, compiles as
    CPU tasks. The lineage, the trace and resume stay in this process."""

    address: str = Field("local", min_length=1, description="local: a Ray instance started on this machine for the run; "
                         "auto: the cluster this machine joined (ray start); ray://HOST:10001: Ray Client; HOST:6379: a head.")
    gpus: int | None = Field(None, ge=1, description="At most this many GPUs (one actor each); default: every GPU of the model.")
    gpu_model: str | None = Field(None, min_length=1, description="In a cluster of several GPU models, the one to measure on "
                                  "(part of its name); default: the model with the most GPUs. Claims never mix models.")


class RunConfig(_Strict):
    """Everything a run needs apart from the task and the API key."""

    model: ModelConfig | None = Field(None, description="The language model; None runs the built-in search only.")
    prices: dict[str, Price] = Field(default_factory=dict, description="Token prices per model name.")
    budget: BudgetConfig = Field(default_factory=BudgetConfig)
    selection: SelectionConfig = Field(default_factory=SelectionConfig)
    lineage: LineageConfig = Field(default_factory=LineageConfig)
    tune: TuneConfig = Field(default_factory=TuneConfig)
    sanitize: SanitizeConfig = Field(default_factory=SanitizeConfig)
    sandbox: SandboxKind = Field(
        "auto", description="gpu, compile-only (no GPU: real compiles, no timing), fake (simulated timings), auto.")
    sandbox_options: SandboxConfig = Field(default_factory=SandboxConfig, description="Sandbox limits (arch, timing budget...).")
    parallel: int = Field(1, ge=1, le=64, description="Model requests in flight at once; one GPU evaluates one candidate at "
                          "a time. With a cluster of N GPUs, at least N + 1 (N candidates evaluate at once).")
    cluster: ClusterConfig | None = Field(None, description="Spread GPU evaluations over a Ray cluster; None: this machine's "
                                          "sandbox alone.")
    profile: Literal["prompt", "promising", "all", "none"] = Field(
        "prompt", description="Which candidates Nsight Compute profiles (GPU sandbox with ncu). prompt: where a model reads "
                              "the diagnosis next (the baseline, each new best, a wrong candidate the model is asked to "
                              "repair; none in a run without a model); promising: every correct candidate within 5% of "
                              "the best; all; none. The rest are diagnosed from timing and resources.")

    @model_validator(mode="after")
    def _tools_measure_alone(self) -> "RunConfig":
        if self.model is not None and self.model.tools and self.parallel > 1:
            raise ValueError("model.tools: a tool-calling session measures on the run's GPU, which evaluates one "
                             "candidate at a time: use parallel = 1")
        return self

    @model_validator(mode="after")
    def _selection_sees_lineage(self) -> "RunConfig":
        self.selection._lineage = self.lineage   # the lineage is built from [selection] alone
        return self

    def price(self) -> Price | None:
        return self.prices.get(self.model.name) if self.model else None

    def public(self) -> dict:
        """The resolved config as written to run.json: no secrets, no credentials inside URLs."""
        data = self.model_dump(mode="json")
        if data.get("model") and data["model"].get("base_url"):
            data["model"]["base_url"] = redact_url(data["model"]["base_url"])
        for other in (data.get("model") or {}).get("others", {}).values():
            if other.get("base_url"):
                other["base_url"] = redact_url(other["base_url"])
        for model in [data.get("model") or {}, *((data.get("model") or {}).get("others") or {}).values()]:
            if isinstance(model.get("extra_body"), dict):
                model["extra_body"] = redact_config(model["extra_body"])
        return data


def run_name(value: str, what: str = "--run-id") -> str:
    """A run or batch id is a folder name under ``--traces``, never a path: letters, digits, ``._-``."""
    if not _NAME.fullmatch(value) or ".." in value:
        raise ConfigError(f"{what}: {value!r} is not a usable name: up to 128 letters, digits, '.', '_' or '-', "
                          "starting with a letter or digit (a name under --traces, not a path)")
    return value


def merge(base: dict, override: dict) -> dict:
    """Deep-merge ``override`` onto ``base`` (dicts merge; everything else replaces)."""
    out = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = value
    return out


def read_file(path: str | Path) -> dict:
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: no such config file")
    if path.suffix != ".toml":
        raise ConfigError(f"{path}: expected a .toml run config")
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (byte {exc.object[exc.start]:#04x} at offset {exc.start})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None


def build(file_data: dict | None = None, overrides: dict | None = None, where: str = "config") -> RunConfig:
    """Validate defaults < file < overrides into a RunConfig, with errors naming each key."""
    data = merge(file_data or {}, overrides or {})
    model = data.get("model")
    if isinstance(model, dict) and not model.get("name"):
        if any(v is not None for k, v in model.items() if k != "name"):
            raise ConfigError(f"{where}: model settings are given but no model name (--model or model.name)")
        data["model"] = None
    if isinstance(data.get("model"), dict) and not data["model"].get("base_url") and os.environ.get("OPENAI_BASE_URL"):
        data["model"]["base_url"] = os.environ["OPENAI_BASE_URL"]
    try:
        cfg = RunConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(format_errors(where, exc)) from None
    if cfg.model and cfg.model.base_url and REDACTED in cfg.model.base_url:
        raise ConfigError(f"{where}: model.base_url: the credentials in the endpoint's URL are never recorded "
                          f"({cfg.model.base_url}): give the URL again (--base-url)")
    if cfg.model and has_redacted(cfg.model.extra_body):
        raise ConfigError(f"{where}: model.extra_body: its credentials are never recorded: give the config file "
                          "that holds them again (--config)")
    if cfg.model:
        from .urls import check_endpoint, check_proxies

        others = [(f"model.others.{name}", other) for name, other in cfg.model.others.items()]
        for key, other in others:
            if has_redacted(other.extra_body) or (other.base_url and REDACTED in other.base_url):
                raise ConfigError(f"{where}: {key}: its credentials are never recorded: give the config file that "
                                  "holds them again (--config)")
        problems = [check_endpoint(cfg.model.base_url, f"{where}: model.base_url (--base-url)")]
        problems += [check_endpoint(other.base_url, f"{where}: {key}.base_url") for key, other in others]
        problem = next(filter(None, problems), "") or check_proxies()
        if problem:
            raise ConfigError(problem)
    if cfg.budget.usd is not None and cfg.model and cfg.price() is None:
        raise ConfigError(f"{where}: a money budget needs the price of model {cfg.model.name!r}: "
                          f"set [prices.\"{cfg.model.name}\"] in the config file or --price-in/--price-out")
    return cfg


def format_errors(where: str, err: ValidationError) -> str:
    lines = []
    for e in err.errors():
        loc = ".".join(str(x) for x in e["loc"]) or "(top level)"
        msg = {"extra_forbidden": "unknown key", "missing": "required key is missing"}.get(e["type"], e["msg"])
        lines.append(f"{where}: {loc}: {msg}")
    return "\n".join(lines)


def is_local(base_url: str | None) -> bool:
    """Loopback or private-network endpoints (vLLM, Ollama, llama.cpp on this machine or the LAN)."""
    if not base_url:
        return False
    host = urlsplit(base_url).hostname or ""
    if host == "localhost" or host.endswith(".localhost") or host.endswith(".local"):
        return True
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return False
    return ip.is_loopback or ip.is_private or ip.is_unspecified


def api_key(model: ModelConfig, explicit: str | None = None) -> str:
    """The key to send: an explicit one, the variable ``model.api_key_env``, or a placeholder for local servers."""
    if explicit:
        return explicit
    value = os.environ.get(model.api_key_env)
    if value:
        return value
    if is_local(model.base_url):
        return LOCAL_PLACEHOLDER_KEY
    where = redact_url(model.base_url) if model.base_url else "the OpenAI API"
    raise ConfigError(f"no API key for {where}: set {model.api_key_env} (or name another variable with --api-key-env)")
