"""``kernelwright judge``: published solutions in KernelBench's own format (a ``ModelNew`` module) judged by the same
protocol as every candidate, one pair, two folders or a JSON-lines file of pairs; resumable (docs/judge.md)."""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import asdict
from pathlib import Path
from typing import Annotated, Optional

import typer

from .app import BadInput, app, console, input_errors, styled
from .exits import ExitCode, epilog
from .options import json_flag

JudgeJson = json_flag("Print the summary and every row as JSON.")


def _task_for(pair, tasks_dir: Path):
    """The task of a pair's problem: a task folder as it is, a problem file imported once into ``tasks_dir``."""
    from sandbox.pytorch.importer import import_problem, task_name
    from sandbox.tasks.task import load_task

    if pair.problem.is_dir():
        return load_task(pair.problem)
    name = task_name(pair.problem)
    folder = tasks_dir / name
    imported = folder / "problem.py"
    if not (folder / "task.toml").is_file() or not imported.is_file() \
            or imported.read_bytes() != pair.problem.read_bytes():   # a problem edited since: imported anew
        import_problem(pair.problem, tasks_dir, name=name, replace=folder.exists())
    return load_task(folder)


def pair_digest(pair, options) -> str:
    """What a saved verdict was judged from: the problem's and the solution's bytes and the options. A saved row is
    reused only under the same digest, so an edited solution or problem, or other options, is judged again."""
    h = hashlib.sha256(repr(sorted(vars(options).items())).encode())
    for path in (pair.problem, pair.solution):
        for name, data in _contents(path):
            h.update(name.encode() + b"\0" + data + b"\0")
    return h.hexdigest()


def _contents(path: Path | None) -> list[tuple[str, bytes]]:
    if path is None:
        return [("", b"-")]
    if path.is_dir():
        return [(str(p.relative_to(path)), p.read_bytes()) for p in sorted(path.rglob("*")) if p.is_file()]
    return [("", path.read_bytes())]


def judge_pair(pair, tasks_dir: Path, options):
    """(Row, Result or None) of one pair; a problem that does not import and a solution that does not parse are
    rows of their own, never a stop."""
    from sandbox.pytorch.modelnew import ModelNewError, load_modelnew
    from sandbox.pytorch.modelnew_judge import judge_modelnew
    from sandbox.tasks.task import TaskError

    from ..report.judge_table import Row, row_of

    if pair.solution is None:
        return Row(pair.name, str(pair.problem), None, "no solution", "no solution was given for this problem"), None
    try:
        task = _task_for(pair, tasks_dir)
    except TaskError as exc:
        return Row(pair.name, str(pair.problem), str(pair.solution), "refused", str(exc).splitlines()[0]), None
    try:
        solution = load_modelnew(pair.solution, label=pair.name)
    except ModelNewError as exc:
        return Row(pair.name, str(pair.problem), str(pair.solution), "invalid", str(exc)), None
    result = judge_modelnew(task, solution, options)
    return row_of(pair, result), result


@app.command(epilog=epilog(OK="every solution judged holds up", FAILED="a solution did not hold up (its row says why)",
                           BAD_INPUT="the inputs cannot be paired, or bad input"))
@input_errors
def judge(first: Annotated[Path, typer.Argument(help="A problem (.py or an imported task folder), a folder of "
                                                     "problems, or a .jsonl file of {problem, solution} pairs.")],
          second: Annotated[Optional[Path], typer.Argument(help="The solution (.py defining ModelNew), or a folder "
                                                                "of them.")] = None,
          out: Annotated[Optional[Path], typer.Option(help="Folder for the imported tasks and one result per "
                                                          "solution; the same command again resumes there.")] = None,
          html: Annotated[Optional[Path], typer.Option(help="Also write the table as an HTML page here.")] = None,
          device: Annotated[str, typer.Option(help="cuda, cpu, or empty for the GPU where there is one.")] = "",
          rounds: Annotated[int, typer.Option(help="Interleaved timing rounds at most.")] = 30,
          budget_s: Annotated[float, typer.Option("--budget-s", help="Seconds of timing per solution (at least "
                                                                     "5 rounds).")] = 20.0,
          build_deadline_s: Annotated[float, typer.Option("--build-deadline-s", help="Seconds a solution's build "
                                                                                    "may take.")] = 600.0,
          torch_tf32: Annotated[str, typer.Option("--torch-tf32", help="TF32 mode of eager and torch.compile: off, "
                                                                       "default or on.")] = "off",
          as_json: JudgeJson = False):
    """Judge solutions in KernelBench's format (class ModelNew(nn.Module), CUDA through load_inline, load or CuPy):
    each built and run confined, checked against the float64 reference at every check size, input distribution and
    held-out size, watched for a missing custom kernel, a silent fallback, written inputs, state across calls, work
    outside the timed region and lower precision, and timed interleaved with eager and torch.compile."""
    from sandbox.pytorch import confined
    from sandbox.pytorch.modelnew_judge import JudgeOptions
    from sandbox.pytorch.modelnew_pairs import PairingError, pairs_for

    from ..report.judge_table import Row, html_page, summarize, text_lines

    if torch_tf32 not in ("off", "default", "on"):
        raise BadInput(f"--torch-tf32 {torch_tf32!r}: expected off, default or on")
    if device not in ("", "cuda", "cpu"):
        raise BadInput(f"--device {device!r}: expected cuda or cpu")
    try:
        pairs = pairs_for(first, second)
    except PairingError as exc:
        raise BadInput(str(exc)) from None
    out = out or Path("traces") / "judge" / (first.stem or "judge")
    results = out / "results"
    results.mkdir(parents=True, exist_ok=True)
    options = JudgeOptions(device=device, rounds=rounds, budget_s=budget_s, build_deadline_s=build_deadline_s,
                           tf32=torch_tf32)
    rows: list[Row] = []
    with confined.Session():
        for i, pair in enumerate(pairs, 1):
            saved = results / f"{pair.name}.json"
            t0 = time.perf_counter()
            digest = pair_digest(pair, options)
            record = _saved(saved)
            if record is not None and record.get("digest") == digest:
                row = Row(**record["row"])
                how = "resumed"
            else:
                row, result = judge_pair(pair, out / "tasks", options)
                _save(saved, row, result, digest)
                how = f"{time.perf_counter() - t0:.0f} s" + (", judged again: the problem, the solution or the options "
                                                             "changed" if record is not None else "")
            rows.append(row)
            if not as_json:
                _progress(i, len(pairs), row, how)
    summary = summarize(rows)
    if html:
        html.write_text(html_page(summary))
    if as_json:
        print(json.dumps(summary.to_json(), indent=2))
    else:
        for line in text_lines(summary):
            console.print(line)
    raise typer.Exit(ExitCode.OK if all(r.holds_up for r in rows) else ExitCode.FAILED)


def _saved(path: Path) -> dict | None:
    """A saved verdict, or None where there is none or it cannot be read (then the pair is judged again)."""
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) and isinstance(record.get("row"), dict) else None


def _save(path: Path, row, result, digest: str) -> None:
    from sandbox.plumbing.files import atomic_write

    record = {"digest": digest, "row": asdict(row),
              "result": json.loads(result.to_json()) if result is not None else None}
    atomic_write(path, json.dumps(record, indent=2))


def _progress(i: int, n: int, row, how: str) -> None:
    speed = "; ".join(f"{s[0]:.2f}x [{s[1]:.2f}, {s[2]:.2f}] vs {name}" for name, s in row.speedup.items())
    style = "green" if row.holds_up else "yellow" if row.correct else "red"
    parts = [f"[{i}/{n}] {row.name}: ", (row.status, style)]
    if speed:
        parts.append(f"; {speed}")
    if row.error:
        parts.append(f"; {row.error}")
    parts += [f"; {flag}" for flag in row.flags if not row.error or flag.split(": ", 1)[-1] != row.error]
    parts.append(f" ({how})")
    console.print(styled(*parts), soft_wrap=True)
