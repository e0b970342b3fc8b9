"""``kernelwright profile TASK CANDIDATE``: check and time a candidate, profile it with Nsight
Compute and print its diagnosis (what bounds it, % of roofline, top issues, changes against a parent)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer

from .app import app, console, device_problem, error_line, input_errors, load_task
from .exits import ExitCode, epilog
from .options import OUTPUT, SANDBOX, TaskArg, TimingBudget, json_flag

ProfileJson = json_flag("Print the profile (counters, rules, diagnosis) as JSON.")


def _load(task: str, candidate: str):
    from sandbox.candidates.candidate import load_candidate, validate_for_task

    t = load_task(task)
    c = load_candidate(t.baseline_path if candidate == "baseline" else candidate)
    validate_for_task(c, t)
    return t, c


@app.command("profile", epilog=epilog(OK="profiled", FAILED="not profiled, or the candidate is not ok",
                                      BAD_INPUT="bad input", NO_DEVICE="no CUDA device (resources only)"))
@input_errors
def profile_cmd(task: TaskArg,
                candidate: Annotated[str, typer.Argument(help="Candidate .cu file, or 'baseline' for the task's own.")],
                parent: Annotated[Optional[str], typer.Option(help="A parent candidate (.cu or 'baseline'): profile it "
                                                                   "too and show what changed.")] = None,
                time_it: Annotated[bool, typer.Option("--time/--no-time", help="Check and time first (measured time "
                                                      "and % of roofline in the diagnosis).", rich_help_panel=SANDBOX)] = True,
                budget: TimingBudget = 0.25,
                save: Annotated[Optional[Path], typer.Option(help="Keep ncu's report and CSV pages in this folder.",
                                                             rich_help_panel=OUTPUT)] = None,
                as_json: ProfileJson = False):
    """Profile a candidate with Nsight Compute and print its diagnosis.

    Without ncu, or without permission to read GPU counters, the diagnosis comes from timing and compiler resources alone, and says so. Without a GPU only the resources are reported."""
    from sandbox.profile.diagnosis import diagnose
    from sandbox import CompileOnlySandbox, GPUSandbox, SandboxConfig

    t, c = _load(task, candidate)
    p = _load(task, parent)[1] if parent else None
    try:
        sb = GPUSandbox(SandboxConfig(timing_budget_s=budget, vendor=False))
    except RuntimeError as exc:
        with CompileOnlySandbox() as cs:
            result = cs.compile(t, c)
        reason = device_problem(str(exc))
        error_line(f"{reason}; resources only")
        text = diagnose(t, result, {"status": "unavailable", "reason": "no CUDA device"}).text
        if as_json:
            print(json.dumps({"status": "unavailable", "reason": reason, "diagnosis": text,
                              "compile": json.loads(result.to_json()).get("compile")}, indent=2, default=str))
        else:
            console.print(text)
        raise typer.Exit(ExitCode.NO_DEVICE) from None
    with sb:
        parent_profile = None
        if p is not None:
            parent_result = sb.evaluate(t, p) if time_it else None
            parent_profile = sb.profile(t, p, result=parent_result if parent_result and parent_result.ok else None)
        result = sb.evaluate(t, c) if time_it else sb.compile(t, c)
        if time_it and not result.ok:
            from .sandbox import print_result

            print_result(result)
            console.print(diagnose(t, result).text)
            if as_json:
                print(result.to_json())
            raise typer.Exit(ExitCode.FAILED)
        prof = sb.profile(t, c, result=result, parent_profile=parent_profile, save_to=save)
    if as_json:
        print(prof.model_dump_json(indent=2))
    else:
        head = f"{c.label} on {t.name}: "
        if prof.ok:
            head += f"profiled {len(prof.kernels)} launch(es) with {prof.tool or 'ncu'} in {prof.seconds:.1f} s"
        else:
            head += prof.note()
        console.print(head, soft_wrap=True)
        console.print(prof.diagnosis)
    raise typer.Exit(ExitCode.OK if prof.ok else ExitCode.FAILED)
