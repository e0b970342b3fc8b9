"""The same answers judged with and without Ray, several times, alternating: is a gap between the two a Ray
effect or one between any two processes?

    python bench/ray_ab.py                                   # softmax, its scripted answers, 2 pairs, on the GPU
    python bench/ray_ab.py --pairs 3 --answers tests/fixtures/agent/softmax --task softmax
    python bench/ray_ab.py --sandbox fake --pairs 1          # the whole path without a GPU (simulated times)

A first run asks a scripted local endpoint for the answers (the ``*.md`` files of ``--answers``, in name order)
without Ray; then each pair replays that run once through one Ray GPU actor and once without Ray, each in a fresh
sandbox. Each run's entries are printed as soon as it ends: speedup over the baseline with its interval, the
candidate's and the baseline's medians, the SM clock the rounds ran at, and the launches the stream hold kept
host latency out of. The last table sets each entry's speedups side by side: the spread among the runs without
Ray against the gap between the two sides.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "fixtures" / "agent")]


def entry_rows(label: str, run) -> list[dict]:
    rows = []
    for e in run.entries:
        s = e.result.speedup("baseline")
        t = e.result.timing
        if s is None or t is None:
            continue
        env = e.result.env
        clock = env.clocks_timed.sm_clock_mhz if env.clocks_timed else None
        hold = env.launch_hold
        rows.append(dict(run=label, entry=e.id, speedup=s.value, low=s.low, high=s.high,
                         candidate_ms=t.impls["candidate"].median_ms, baseline_ms=t.impls[t.primary].median_ms,
                         sm_mhz=clock.median if clock else None, held=hold.held if hold else None,
                         ran_out=hold.ran_out if hold else None))
    return rows


def print_rows(rows: list[dict]) -> None:
    for r in rows:
        print(f"| {r['run']} | {r['entry']} | {r['speedup']:.3f} [{r['low']:.3f}, {r['high']:.3f}] | "
              f"{r['candidate_ms']:.4f} | {r['baseline_ms']:.4f} | {r['sm_mhz']} | {r['held']} ({r['ran_out']}) |",
              flush=True)


def side_by_side(rows: list[dict]) -> None:
    print("\n| entry | without Ray: speedups | with Ray: speedups | spread without Ray | Ray minus without (means) |")
    print("|---|---|---|---|---|")
    for entry in sorted({r["entry"] for r in rows}):
        local = [r["speedup"] for r in rows if r["entry"] == entry and not r["run"].startswith("ray")]
        ray = [r["speedup"] for r in rows if r["entry"] == entry and r["run"].startswith("ray")]
        spread = max(local) - min(local) if len(local) > 1 else float("nan")
        gap = statistics.mean(ray) - statistics.mean(local) if ray and local else float("nan")
        print(f"| {entry} | {', '.join(f'{v:.3f}' for v in local)} | {', '.join(f'{v:.3f}' for v in ray)} | "
              f"{spread:.3f} | {gap:+.3f} ({100 * gap / statistics.mean(local):+.1f}%) |")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--task", default="softmax")
    ap.add_argument("--answers", type=Path, default=ROOT / "tests" / "fixtures" / "agent" / "softmax",
                    help="folder of *.md model answers, served in name order")
    ap.add_argument("--pairs", type=int, default=2, help="pairs of replays (one with Ray, one without)")
    ap.add_argument("--sandbox", default="gpu", choices=["gpu", "fake"])
    ap.add_argument("--ray-gpus", type=int, default=1, help="GPU actors of the runs with Ray (with --sandbox fake, the "
                    "fake GPUs of the local Ray instance)")
    args = ap.parse_args(argv)
    if args.pairs < 1:
        ap.error("--pairs must be at least 1")
    if args.ray_gpus < 1:
        ap.error("--ray-gpus must be at least 1")
    answers = sorted(args.answers.glob("*.md")) if args.answers.is_dir() else []
    if not answers:
        ap.error(f"--answers: {args.answers} holds no *.md answers")
    import agent
    from agent.config import ConfigError
    from sandbox import load_task
    from sandbox.tasks.task import TaskError
    from scripted_server import Script, serve_in_background

    try:
        load_task(args.task)
    except TaskError as exc:
        ap.error(str(exc).splitlines()[0])
    server, url = serve_in_background(Script([p.read_text() for p in answers]))
    cluster = {"address": "local", "gpus": args.ray_gpus}
    rows: list[dict] = []
    print("| run | entry | speedup [95%] | candidate ms | baseline ms | SM MHz | held (ran out) |")
    print("|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as traces:
        common = dict(sandbox=args.sandbox, tune=False, sanitize=False, iterations=len(answers),
                      traces=Path(traces))
        try:
            first = agent.optimize(args.task, model="scripted", base_url=url, config={"parallel": 2}, **common)
            rows += entry_rows("local 0", first)
            print_rows(rows)
            for i in range(1, args.pairs + 1):
                for label, config in ((f"ray {i}", {"parallel": 2, "cluster": cluster}), (f"local {i}", {"parallel": 2})):
                    got = entry_rows(label, agent.optimize(args.task, replay=first.path, config=config, **common))
                    print_rows(got)
                    rows += got
        except ConfigError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        finally:
            server.shutdown()
    side_by_side(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
