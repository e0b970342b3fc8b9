"""Where a profile's seconds go: the profiled program alone, then Nsight Compute runs of the same program with
different sections and metrics, and the imports of a report's pages.

For one task's baseline at its benchmark size (as a run profiles a new best), each variant is one ncu run of
``python -m sandbox.worker.profile_target`` (the program ``Profiler`` profiles) with the same kernel filter and launch
skip. The table gives its wall seconds, the profiled program's launches under ncu (its warm-up and the replay
passes), the replay passes ncu reports, and what the diagnosis would get from it: the summary's fields
(``sandbox.profile.counters``), ncu's OPT/WRN rules and the diagnosis's issues, each against the sections in use now.
The variants add a section left out of that set, or leave one in it out; with ``--each-metric``, they leave out
one of the metrics named beside the sections (``ncu.METRICS``) each: the replay passes that metric costs at the
margin, and what the summary and the diagnosis would lose without it.

    python bench/profile_cost.py [--task softmax] [--repeat 2] [--each-metric]
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT)]

from sandbox import GPUSandbox, load_candidate, load_task  # noqa: E402
from sandbox.candidates.plan import resolve  # noqa: E402
from sandbox.plumbing.tools import run_tool  # noqa: E402
from sandbox.profile import ncu  # noqa: E402
from sandbox.host.profiler import kernels_from  # noqa: E402
from sandbox.profile.counters import summarize  # noqa: E402
from sandbox.profile.diagnosis import diagnose  # noqa: E402

PASSES = re.compile(r"(\d+) pass(?:es)?\b")


def variants(summary_metrics: list[str], each_metric: bool = False) -> dict[str, tuple[tuple[str, ...], tuple[str, ...]]]:
    """name -> (sections, metrics)."""
    now = (ncu.SECTIONS, ncu.METRICS + ncu.SUMMARY_METRICS)
    out = {"now: sections + metrics": now}
    if each_metric:
        return {**out, **{f"now without {m}": (ncu.SECTIONS, tuple(x for x in now[1] if x != m)) for m in ncu.METRICS}}
    for section in ("MemoryWorkloadAnalysis", "MemoryWorkloadAnalysis_Tables"):  # sections left out of the set in use
        if section not in ncu.SECTIONS:
            out[f"now + {section}"] = (ncu.SECTIONS + (section,), now[1])
    for section in ncu.SECTIONS:
        out[f"now without {section}"] = (tuple(s for s in ncu.SECTIONS if s != section), now[1])
    return {**out, "duration only": ((), ("gpu__time_duration.sum",)),
            "summary's metrics only": ((), tuple(m for m in summary_metrics if not m.startswith("derived__")))}


def issue_keys(task, got: list[dict], plan: dict, sizes: dict) -> set[tuple]:
    """What the diagnosis of these launches would say, without its numbers: (source, topic, kernel) per issue."""
    profile = dict(status="ok", kernels=kernels_from(got, plan), sizes=sizes)
    return {(i["source"], i["topic"], i["kernel"]) for i in diagnose(task, None, profile).data["issues"]}


def command(exe: str, names: list[str], skip: int, count: int, report: Path, target: list[str], sections, metrics,
            extra: tuple[str, ...] = ()) -> list[str]:
    """``ncu.profile_command``'s run with other sections (and ``extra`` options before the report's)."""
    cmd = [exe, "--clock-control", "none", "--cache-control", "all", "--replay-mode", "kernel",
           "--kernel-name-base", "mangled", "-k", ncu.kernel_filter(names),
           "--launch-skip", str(skip), "--launch-count", str(count)]
    for s in sections:
        cmd += ["--section", s]
    if metrics:
        cmd += ["--metrics", ",".join(metrics)]
    return cmd + list(extra) + ["--export", str(report), "--force-overwrite", *target]


def pages(exe: str, rep: Path, cwd: Path, env: dict) -> tuple[dict, dict]:
    texts, seconds = {}, {}
    for page in ("details", "raw"):
        code, texts[page], seconds[page] = run_tool(ncu.import_command(exe, rep, page), cwd, env, 180,
                                                    keep_stdout_only=True)
    return texts, seconds


def profiled_program(prof, task, cand, info, cubin: bytes, sizes: dict, prefix: str):
    """The program ``prof`` (a ``Profiler``) runs under ncu for ``cand`` at ``sizes``, in a new work folder: (its
    resolved plan, the kernel names, launches per run of the plan, the warm-up launches ncu skips, the folder, the
    command)."""
    plan = resolve(task, cand, info, sizes)
    names = [launch["func"] for launch in plan["launches"]]
    count = len(names)
    work = Path(tempfile.mkdtemp(prefix=prefix))
    return plan, names, count, prof.config.warmup_rounds * count, work, prof._target(task, plan, cubin, sizes, work)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--task", default="softmax")
    ap.add_argument("--repeat", type=int, default=1, help="runs of each variant (median wall)")
    ap.add_argument("--each-metric", action="store_true",
                    help="variants that leave out one named metric each (instead of the sections' variants)")
    args = ap.parse_args()
    task = load_task(args.task)
    cand = load_candidate(task.baseline_path)
    with GPUSandbox() as sb:
        prof = sb.profiler
        exe = prof.config.ncu or ncu.find_ncu()
        if not exe:
            print("no ncu")
            return 1
        compiled, info, cubin = sb.builder.build(task, cand)
        sizes = dict(task.spec.sizes.benchmark)
        plan, names, count, skip, work, target = profiled_program(prof, task, cand, info, cubin, sizes, "pc-")
        env = prof._profile_env()
        cwd = work / "cwd"
        print(f"{task.name} {sizes}, ncu {exe}; extras/python: "
              f"{sorted(p.name for p in (Path(exe).resolve().parent / 'extras' / 'python').glob('*'))[:6]}", flush=True)
        walls = []
        for _ in range(args.repeat):
            code, out, s = run_tool(target, cwd, env, 300)
            walls.append(s)
        print(f"program alone: {statistics.median(walls):.2f} s (exit {code}); its parts: "
              f"{json.loads((work / 'target.json').read_text()).get('split_s')}", flush=True)
        # the current set first: it says which metrics the summary reads
        base_rep = work / "now"
        code, out, s = run_tool(command(exe, names, skip, count, base_rep, target, ncu.SECTIONS, ncu.METRICS),
                                cwd, env, 300)
        texts, imp = pages(exe, base_rep.with_suffix(".ncu-rep"), cwd, env)
        rows = ncu.launches(texts["raw"], texts["details"])
        raw_names = sorted({m for r in rows for m in r["metrics"]})
        summary = [summarize(r["metrics"]) for r in rows]
        used = sorted({m for m in raw_names if _read_by_summary(m)})
        parts = json.loads((work / "target.json").read_text()).get("split_s")
        print(f"now: {s:.2f} s (program parts under ncu: {parts}), imports details {imp['details']:.2f} s, "
              f"raw {imp['raw']:.2f} s; "
              f"{len(raw_names)} raw metrics, {len(used)} read by the summary; summary fields "
              f"{sorted(summary[0]) if summary else None}", flush=True)
        rules_now = {(r["section"], r["rule"], r["type"]) for row in rows for r in row["rules"]
                     if r["type"] in ("OPT", "WRN")}
        print(f"rules now (OPT/WRN): {sorted(rules_now)}", flush=True)
        issues_now = issue_keys(task, rows, plan, sizes)
        print(f"the diagnosis now: {sorted(issues_now)}", flush=True)
        # one run that also prints the details page, every metric the summary reads named in --metrics: does the
        # page name them all (then no import is needed)?
        wanted = sorted(set(ncu.METRICS) | {m for m in used if not m.startswith("derived__")})
        code, out2, s2 = run_tool(command(exe, names, skip, count, work / "both", target, ncu.SECTIONS, wanted,
                                          ncu.PRINT_DETAILS), cwd, env, 300)
        page = ncu.parse_details(out2)
        printed = {name for d in page.values() for section in d["sections"].values() for name in section}
        print(f"export + details page printed (metric names): {s2:.2f} s, exit {code}, CSV on stdout: {bool(page)}; "
              f"summary metrics not on the page: {sorted(set(used) - printed)}", flush=True)
        print("\n| variant | wall s (median) | the program's launches s (median) | passes | summary fields | OPT/WRN rules "
              "| fields missing | fields added | the diagnosis's issues, against now |")
        print("|---|---|---|---|---|---|---|---|---|")
        for name, (sections, metrics) in variants(used, args.each_metric).items():
            ws, launched, passes = [], [], None
            rep = work / "v"
            for _ in range(args.repeat):
                code, out, s = run_tool(command(exe, names, skip, count, rep, target, sections, metrics), cwd, env,
                                        300)
                ws.append(s)
                launched.append(json.loads((work / "target.json").read_text()).get("split_s", {}).get("launches", 0.0))
                found = PASSES.findall(out)
                passes = "+".join(found) if found else f"? (exit {code})"
            texts, _ = pages(exe, rep.with_suffix(".ncu-rep"), cwd, env)
            got = ncu.launches(texts["raw"], texts["details"])
            fields = set(summarize(got[0]["metrics"])) if got else set()
            rules = {(r["section"], r["rule"], r["type"]) for row in got for r in row["rules"]
                     if r["type"] in ("OPT", "WRN")}
            missing = sorted(set(summary[0]) - fields) if summary else []
            added = sorted(fields - set(summary[0])) if summary else []
            keys = issue_keys(task, got, plan, sizes)
            differ = "same" if keys == issues_now else (f"lacks {sorted(issues_now - keys)}; adds {sorted(keys - issues_now)}")
            print(f"| {name} | {statistics.median(ws):.2f} | {statistics.median(launched):.2f} | {passes} | {len(fields)} | {len(rules)} | "
                  f"{' '.join(missing)[:160]} | {' '.join(added)[:160]} | {differ[:300]} |", flush=True)
        shutil.rmtree(work, ignore_errors=True)
    return 0


def _read_by_summary(name: str) -> bool:
    from sandbox.profile.counters import _LIMIT, _STALL, FIELDS

    return any(name in names for names in FIELDS.values()) or bool(_STALL.match(name) or _LIMIT.match(name))


if __name__ == "__main__":
    sys.exit(main())
