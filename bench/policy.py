"""Parent-selection policies compared without a model or a GPU, on recorded landscapes.

The landscapes are bench/results/tuner_points.json: every configuration of three tuned kernels (histogram,
sgemm, softmax) measured once on an H200 by bench/tuner.py, compile failures included. A simulated proposer
stands in for the model: it changes its parent's configuration (one knob, sometimes two; a step to the next
value, sometimes any value), and the "evaluation" is the recorded time with 2% log-normal noise. Each policy
(``agent.loop.database``: the very code a run uses) picks the parents; the repair rule of a run comes first (a
failed candidate is the next parent, up to two failures in a row). A configuration already evaluated is a
duplicate: its request is spent, nothing is measured (as a run skips a duplicate build).

The archive's cells are the values of the landscape's two knobs with the most values: the landscapes hold no
profiles, so this stands in for the descriptors a run uses (% of roofline, registers, shared memory, techniques).

Reported: what the run would declare after N requests (the best-measured configuration), as its true speedup
over the kernel's default configuration divided by the landscape's best, averaged over seeds; and how often the
run found a configuration within 2% of the landscape's best.

    python bench/policy.py                          # 200 seeds, N = 15, 30, 60 (about a minute)
    python bench/policy.py --seeds 50 --requests 20
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from agent.loop.database import POLICIES, Point, Settings, pick  # noqa: E402

NOISE = 0.02
MAX_REPAIRS = 2


class Landscape:
    def __init__(self, name: str, case: dict):
        self.name = name
        self.dims = list(case["envelope"]["dims"].items())
        measured = case["measured"]
        points = {tuple(int(i) for i in index.split(",")): measured.get(key) for index, key in case["keys"].items()}
        order = _positions(self.dims, points)
        self.ms: dict[tuple, float | None] = {}
        for point, m in points.items():
            config = tuple(point[order[d]] for d in range(len(self.dims)))
            self.ms[config] = m["ms"] if m and m["status"] == "ok" else None
        self.start = tuple(0 for _ in self.dims)
        base = self.ms[self.start]
        self.speedup = {c: (base / ms if ms else None) for c, ms in self.ms.items()}
        self.best = max(s for s in self.speedup.values() if s)
        widest = sorted(range(len(self.dims)), key=lambda d: -len(self.dims[d][1]))[:2]
        self.cell_dims = sorted(widest)

    def cell(self, config: tuple) -> tuple:
        return tuple((self.dims[d][0], config[d]) for d in self.cell_dims)

    def mutate(self, config: tuple, rng: random.Random) -> tuple:
        child = list(config)
        for d in rng.sample(range(len(self.dims)), 2 if rng.random() < 0.3 else 1):
            size = len(self.dims[d][1])
            if rng.random() < 0.7:
                child[d] = min(size - 1, max(0, child[d] + rng.choice((-1, 1))))
            else:
                child[d] = rng.randrange(size)
        return tuple(child)


def _positions(dims: list, points: dict) -> list[int]:
    """Which position of a cached point's index holds each knob (the cache's ``dims`` are sorted by name, its
    indices follow the kernel's order): read from the configurations measured, ``BLOCK=256 VEC=4``."""
    order = []
    named = [(p, dict(kv.split("=", 1) for kv in m["config"].split())) for p, m in points.items() if m]
    for name, values in dims:
        fits = [pos for pos in range(len(dims)) if all(values[p[pos]] == c[name] for p, c in named)]
        if len(fits) != 1:
            raise SystemExit(f"knob {name}: cannot tell its place in the cached points ({fits})")
        order.append(fits[0])
    return order


def simulate(land: Landscape, settings: Settings, requests: int, seed: int) -> float:
    """The true speedup (over the default configuration) of what the run would declare after ``requests``."""
    rng = random.Random(seed)
    configs: dict[str, tuple] = {"c0": land.start}
    points = [Point("c0", 1.0, 0, land.cell(land.start))]
    seen = {land.start}
    failed_in_a_row, repaired = 0, set()
    for iteration in range(1, requests + 1):
        last = points[-1]
        if last.score is None and last.id not in repaired and failed_in_a_row <= MAX_REPAIRS:
            repaired.add(last.id)
            parent = last.id
        else:
            draw = random.Random(hash((seed, len(points), iteration)))
            parent = pick(points, settings, iteration, draw).id
        child = land.mutate(configs[parent], rng)
        if child in seen:
            continue
        seen.add(child)
        pid = f"c{len(points)}"
        configs[pid] = child
        true = land.speedup.get(child)
        measured = true * math.exp(rng.gauss(0, NOISE)) if true else None
        failed_in_a_row = 0 if measured else failed_in_a_row + 1
        points.append(Point(pid, measured, iteration, land.cell(child)))
    declared = max((p for p in points if p.score is not None), key=lambda p: p.score)
    return land.speedup[configs[declared.id]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=Path, default=ROOT / "bench" / "results" / "tuner_points.json")
    parser.add_argument("--seeds", type=int, default=200)
    parser.add_argument("--requests", type=int, nargs="+", default=[15, 30, 60])
    args = parser.parse_args()
    cases = json.loads(args.points.read_text())["cases"]
    lands = [Landscape(name, case) for name, case in sorted(cases.items())]
    defaults = Settings()
    print(f"{len(lands)} landscapes ({', '.join(f'{l.name}: {len(l.ms)} configurations' for l in lands)}), "
          f"{args.seeds} seeds, noise {NOISE:.0%}; explore {defaults.explore}, pool {defaults.pool}, islands "
          f"{defaults.islands}, migration every {defaults.migration_interval} evaluations\n")
    header = "| policy | N | " + " | ".join(l.name for l in lands) + " | mean | within 2% of the best |"
    print(header)
    print("|" + "---|" * (header.count("|") - 1))
    means: dict[str, list[float]] = {}
    shares: dict[tuple[str, int], list[float]] = {}
    variants = [(policy, Settings(policy=policy)) for policy in POLICIES] + [
        ("islands (2, every 12)", Settings(policy="islands", islands=2, migration_interval=12)),
        ("islands (4, every 4)", Settings(policy="islands", islands=4, migration_interval=4)),
        ("archive (explore 0.5)", Settings(policy="archive", explore=0.5)),
        ("best_explore (explore 0)", Settings(policy="best_explore", explore=0.0))]
    for n in args.requests:
        for policy, settings in variants:
            fractions, hits = [], 0
            row = []
            for land in lands:
                found = [simulate(land, settings, n, seed) for seed in range(args.seeds)]
                share = [f / land.best for f in found]
                fractions += share
                hits += sum(s >= 0.98 for s in share)
                row.append(f"{statistics.mean(share):.3f}")
            mean = statistics.mean(fractions)
            means.setdefault(policy, []).append(mean)
            shares[policy, n] = fractions
            print(f"| {policy} | {n} | " + " | ".join(row) + f" | {mean:.3f} | {hits / len(fractions):.0%} |")
    print("\npaired against best_explore (same landscape and seed), the difference of the means with its 95% interval:\n")
    print("| policy | " + " | ".join(f"N = {n}" for n in args.requests) + " |")
    print("|---|" + "---|" * len(args.requests))
    wins = {}
    for policy, _ in variants[1:]:
        cells = []
        for n in args.requests:
            diff = [a - b for a, b in zip(shares[policy, n], shares["best_explore", n])]
            mean, half = statistics.mean(diff), 1.96 * statistics.stdev(diff) / math.sqrt(len(diff))
            cells.append(f"{mean:+.3f} [{mean - half:+.3f}, {mean + half:+.3f}]")
            wins.setdefault(policy, []).append((mean - half > 0, mean + half < 0))
        print(f"| {policy} | " + " | ".join(cells) + " |")
    better = [p for p in POLICIES[1:] if any(w for w, _ in wins[p]) and not any(l for _, l in wins[p])]
    winner = max(better, key=lambda p: statistics.mean(means[p])) if better else "best_explore"
    print(f"\ndefault: {winner} (a policy replaces best_explore where it is better by a paired 95% interval at some N "
          "and worse at none)")


if __name__ == "__main__":
    main()
