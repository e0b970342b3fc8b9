"""With --json, stdout is one JSON document or nothing, on every command that has the flag and at every exit
(success, failure, bad input, no device): what a command says for people goes to stderr."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from agent.cli import app

from conftest import private_cache

ROOT = Path(__file__).resolve().parent.parent
BASELINE = ROOT / "kernels" / "vector_add" / "baseline.cu"
pytestmark = pytest.mark.timeout(300)


def _invocations(traces: Path, cfg: Path) -> dict[str, list[list[str]]]:
    fake = ["--sandbox", "fake", "--config", str(cfg), "--traces", str(traces)]
    return {
        "tasks": [["tasks"], ["tasks", str(traces / "none")]],
        "compile": [["compile", "vector_add", str(BASELINE)], ["compile", "vector_add", str(traces / "none.cu")]],
        "eval": [["eval", "vector_add", str(BASELINE)], ["eval", "nope", str(BASELINE)]],
        "check-task": [["check-task", str(traces / "none")]],
        "doctor": [["doctor"]],
        "optimize": [["optimize", "vector_add", "--run-id", "j1", *fake], ["optimize", "nope", *fake]],
        "batch": [["batch", "vector_add", "--batch-id", "b1", *fake], ["batch", *fake]],
        "profile": [["profile", "vector_add", "baseline"], ["profile", "vector_add", str(traces / "none.cu")]],
        "show": [["show", "j1", "--traces", str(traces)], ["show", "nope", "--traces", str(traces)]],
        "verify": [["verify", "j1", "--traces", str(traces)], ["verify", "nope", "--traces", str(traces)]],
        "best": [["best", "vector_add", "--gpu", "NVIDIA H200"], ["best", "vector_add"], ["best", "nope"]],
        "judge": [["judge", str(traces / "none.jsonl")], ["judge", str(BASELINE)]],
    }


def _has_json(command) -> bool:
    return any("--json" in getattr(p, "opts", []) for p in command.params)


def test_every_json_command_prints_json_or_nothing_on_stdout(tmp_path, monkeypatch, compiled_kernels):
    monkeypatch.setenv("KERNELWRIGHT_CACHE_DIR", str(private_cache(tmp_path / "cache", compiled_kernels)))
    cfg = tmp_path / "small.toml"
    cfg.write_text("[tune]\nmax_evaluations = 1\n")
    invocations = _invocations(tmp_path / "t", cfg)
    group = typer.main.get_command(app)
    with_json = {name for name, cmd in group.commands.items() if _has_json(cmd)}
    assert with_json == set(invocations), "each command with --json is tried here"
    codes = set()
    for name, tries in invocations.items():
        for args in tries:
            result = CliRunner().invoke(app, [*args, "--json"], catch_exceptions=False)
            codes.add(result.exit_code)
            out = result.stdout.strip()
            if out:
                try:
                    json.loads(out)
                except ValueError:
                    pytest.fail(f"{args} --json (exit {result.exit_code}) printed no JSON on stdout:\n{out[:500]}")
            assert "Traceback" not in result.stderr, (args, result.stderr)
    assert {0, 1, 2, 3} <= codes, codes  # success, failure, bad input and no device were all tried
