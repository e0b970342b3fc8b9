"""Judge a whole folder of KernelBench-format solutions on one GPU: the problems are imported and the solutions built
on the host's cores, several at a time (each in a confined process of its own), while the GPU judges the solutions
built already, one at a time. Prints each solution's time split into build, checks and timing, then the totals.

    python bench/judge_level.py KernelBench/level1 runs/level1 --out judged/level1 [--workers 8] [--budget-s 10]

Resumable: results are ``kernelwright judge``'s (OUT/results/NAME.json), and a solution judged already is skipped.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("problems", type=Path)
    parser.add_argument("solutions", type=Path)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--workers", type=int, default=max(1, (os.cpu_count() or 2) - 2),
                        help="problems imported and solutions built at once (default: the host's cores less two)")
    parser.add_argument("--budget-s", type=float, default=10.0, help="seconds of timing per solution")
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args(argv)

    from agent.cli.judge import _save, _task_for
    from agent.report.judge_table import Row, row_of, summarize, text_lines
    from sandbox.pytorch import confined
    from sandbox.pytorch.modelnew import ModelNewError, load_modelnew
    from sandbox.pytorch.modelnew_judge import JudgeOptions, judge_modelnew, prebuild
    from sandbox.pytorch.modelnew_pairs import pairs_for
    from sandbox.tasks.task import TaskError

    pairs = pairs_for(args.problems, args.solutions)
    results = args.out / "results"
    results.mkdir(parents=True, exist_ok=True)
    options = JudgeOptions(rounds=args.rounds, budget_s=args.budget_s)
    local = threading.local()
    sessions: list = []
    lock = threading.Lock()

    def session():
        if not hasattr(local, "session"):
            local.session = confined.Session()
            with lock:
                sessions.append(local.session)
        return local.session

    def prepare(pair):
        """(task or Row, solution, build seconds), on a worker thread with its own confined process."""
        with _Entered(session()):
            if pair.solution is None:
                return Row(pair.name, str(pair.problem), None, "no solution"), None, 0.0
            try:
                task = _task_for(pair, args.out / "tasks")
                solution = load_modelnew(pair.solution, label=pair.name)
            except (TaskError, ModelNewError) as exc:
                status = "invalid" if isinstance(exc, ModelNewError) else "refused"
                row = Row(pair.name, str(pair.problem), str(pair.solution), status, str(exc).splitlines()[0])
                return row, None, 0.0
            t0 = time.perf_counter()
            prebuild(task, solution, options)
            return task, solution, time.perf_counter() - t0

    todo = [p for p in pairs if not (results / f"{p.name}.json").is_file()]
    rows = {p.name: Row(**json.loads((results / f"{p.name}.json").read_text())["row"])
            for p in pairs if p not in todo}
    start = time.perf_counter()
    print(f"{len(pairs)} problems, {len(rows)} judged already, {len(todo)} to judge; {args.workers} build workers")
    with ThreadPoolExecutor(args.workers) as pool, confined.Session():
        ahead = [pool.submit(prepare, p) for p in todo]
        for i, (pair, future) in enumerate(zip(todo, ahead), 1):
            waited = time.perf_counter()
            first, solution, build_s = future.result()
            waited = time.perf_counter() - waited
            if solution is None:
                row, result = first, None
            else:
                result = judge_modelnew(first, solution, options)
                row = row_of(pair, result)
            _save(results / f"{pair.name}.json", row, result)
            rows[pair.name] = row
            split = row.split_s or {}
            print(f"[{len(rows)}/{len(pairs)}] {pair.name}: {row.status}; build {build_s:.1f} s ahead "
                  f"(+{split.get('build', 0.0):.1f} s at judging), checks {split.get('checks', 0.0):.1f} s, timing "
                  f"{split.get('timing', 0.0):.1f} s; GPU waited {waited:.1f} s for its import and build", flush=True)
    for s in sessions:
        s.close()
    wall = time.perf_counter() - start
    ordered = [rows[p.name] for p in pairs]
    summary = summarize(ordered)
    (args.out / "summary.json").write_text(json.dumps(dict(summary.to_json(), wall_s=wall, workers=args.workers), indent=2))
    for line in text_lines(summary):
        print(line)
    parts = {k: sum((r.split_s or {}).get(k, 0.0) for r in ordered) for k in ("build", "checks", "timing")}
    print(f"wall {wall:.0f} s for {len(todo)} solutions judged now ({wall / max(1, len(todo)):.1f} s each); "
          f"on the GPU: build at judging {parts['build']:.0f} s, checks {parts['checks']:.0f} s, "
          f"timing {parts['timing']:.0f} s")
    return 0


class _Entered:
    """Makes ``session`` the confined session that calls on this thread run in."""

    def __init__(self, session):
        self.session = session

    def __enter__(self):
        from sandbox.pytorch.confined import _ENTERED

        self.token = _ENTERED.set(self.session)
        return self.session

    def __exit__(self, *exc):
        from sandbox.pytorch.confined import _ENTERED

        _ENTERED.reset(self.token)


if __name__ == "__main__":
    raise SystemExit(main())
