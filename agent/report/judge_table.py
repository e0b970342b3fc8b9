"""The table of ``kernelwright judge``: per solution its verdict, speedups and flags; over all problems given, fast_p
by KernelBench's rule (correct at the benchmark size, mean speedup above p), by the "no PyTorch fallback" rule
(the same, and a kernel it built ran) and by ours (every check held and the low end of the speedup's interval
above p), the geometric mean, and the share that holds up. A problem without a solution, refused at import or
whose solution failed stays in the denominator."""

from __future__ import annotations

import html
import math
import random
from dataclasses import asdict, dataclass, field

PS = (0.0, 1.0, 1.2, 1.5, 2.0)


@dataclass
class Row:
    name: str
    problem: str
    solution: str | None
    status: str                      # a Result status, or "no solution", "refused" (the problem did not import)
    error: str = ""
    speedup: dict = field(default_factory=dict)        # baseline -> [value, low, high] (median ratio, interval)
    mean_speedup: dict = field(default_factory=dict)   # baseline -> KernelBench's mean ratio
    flags: list[str] = field(default_factory=list)     # "check: line" of every flagged or failed verdict
    no_fallback: bool = False
    holds_up: bool = False
    split_s: dict = field(default_factory=dict)        # build, checks, timing

    @property
    def correct(self) -> bool:
        return self.status == "ok"


def row_of(pair, result) -> Row:
    from sandbox.pytorch.modelnew_judge import holds_up, mean_speedup, no_fallback_correct

    t = result.timing
    speed = {n: [s.value, s.low, s.high] for n, s in (t.speedup.items() if t else [])}
    means = {n: m for n in speed for m in [mean_speedup(result, n)] if m is not None}
    return Row(name=pair.name, problem=str(pair.problem), solution=str(pair.solution), status=result.status.value,
               error=result.error, speedup=speed, mean_speedup=means,
               flags=[f"{v.check}: {v.line}" for v in result.verdicts if v.outcome in ("flag", "fail")],
               no_fallback=no_fallback_correct(result), holds_up=holds_up(result),
               split_s=dict(build=result.cost.compile_s, checks=result.cost.check_gpu_s, timing=result.cost.time_gpu_s))


def fast_p(rows: list[Row], against: str, p: float, rule: str) -> float:
    """Share of all rows that count at ``p`` by ``rule``: kernelbench, no_fallback or ours."""
    if not rows:
        return 0.0

    def counts(r: Row) -> bool:
        if not r.correct:
            return False
        if rule == "ours":
            s = r.speedup.get(against)
            return r.holds_up and (p == 0.0 or (s is not None and s[1] > p))
        if rule == "no_fallback" and not r.no_fallback:
            return False
        return p == 0.0 or r.mean_speedup.get(against, -math.inf) > p

    return sum(1 for r in rows if counts(r)) / len(rows)


def geomean_ci(values: list[float], resamples: int = 2000, seed: int = 0):
    logs = [math.log(v) for v in values if v > 0]
    if not logs:
        return None
    rng = random.Random(seed)
    means = sorted(sum(rng.choices(logs, k=len(logs))) / len(logs) for _ in range(resamples))
    return (math.exp(sum(logs) / len(logs)), math.exp(means[int(0.025 * (resamples - 1))]),
            math.exp(means[int(0.975 * (resamples - 1))]))


@dataclass
class Table:
    """Over every problem given: how many are correct at the benchmark size and hold up, fast_p per baseline, rule
    and threshold (``fast_p[against][rule][str(p)]``), the geometric mean speedup over the correct ones with its
    interval (or None), and the rows."""
    problems: int
    correct: int
    holds_up: int
    fast_p: dict[str, dict[str, dict[str, float]]]
    geomean: dict[str, tuple[float, float, float] | None]
    rows: list[Row]

    def to_json(self) -> dict:
        return dict(problems=self.problems, correct=self.correct, holds_up=self.holds_up, fast_p=self.fast_p,
                    geomean={k: list(g) if g else None for k, g in self.geomean.items()},
                    rows=[asdict(r) for r in self.rows])


def summarize(rows: list[Row]) -> Table:
    fast: dict = {}
    geomean: dict = {}
    for against in ("eager", "compile"):
        fast[against] = {rule: {str(p): fast_p(rows, against, p, rule) for p in PS}
                         for rule in ("kernelbench", "no_fallback", "ours")}
        geomean[against] = geomean_ci([r.speedup[against][0] for r in rows if r.correct and against in r.speedup])
    return Table(problems=len(rows), correct=sum(r.correct for r in rows), holds_up=sum(r.holds_up for r in rows),
                 fast_p=fast, geomean=geomean, rows=list(rows))


def _interval(s) -> str:
    return f"{s[0]:.2f}x [{s[1]:.2f}, {s[2]:.2f}]" if s else "-"


def text_lines(table: Table) -> list[str]:
    """The table's totals as plain lines (the per-solution rows are printed as they finish)."""
    n = table.problems
    lines = [f"{n} problems; correct at the benchmark size {table.correct} of {n}; holds up (every check) "
             f"{table.holds_up} of {n}"]
    for against in ("eager", "compile"):
        lines.append(f"fast_p vs {against}   " + "  ".join(f"p={p:g}" for p in PS))
        for rule, label in (("kernelbench", "KernelBench's rule (mean)"), ("no_fallback", "no-fallback rule"),
                            ("ours", "ours (every check, interval low end)")):
            cells = "  ".join(f"{table.fast_p[against][rule][str(p)]:.2f}" for p in PS)
            lines.append(f"  {label:<38} {cells}")
        g = table.geomean[against]
        lines.append("  geomean speedup over the correct: " + (_interval(g) if g else "-"))
    return lines


def html_page(table: Table, title: str = "kernelwright judge") -> str:
    """A self-contained HTML page of the table; every value escaped."""
    e = html.escape
    head = "".join(f"<p>{e(line)}</p>" for line in text_lines(table))
    rows = "".join(
        "<tr>" + "".join(f"<td>{e(str(c))}</td>" for c in (
            r.name, r.status, _interval(r.speedup.get("eager")), _interval(r.speedup.get("compile")),
            "yes" if r.holds_up else "no", "; ".join(r.flags) or r.error)) + "</tr>"
        for r in table.rows)
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{e(title)}</title></head><body>"
            f"<h1>{e(title)}</h1>{head}<table border='1'><tr><th>solution</th><th>verdict</th><th>vs eager</th>"
            f"<th>vs compile</th><th>holds up</th><th>flags</th></tr>{rows}</table></body></html>")
