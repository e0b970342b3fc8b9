"""The device floor of a fully checked candidate: what its checks must run on the GPU, from two measurements.

    python bench/stage_parts.py --task softmax --reps 16 > parts.txt                 # on the GPU
    python bench/throughput.py --parts candidates --json cand.json                   # on the GPU
    python bench/candidate_floor.py --parts parts.txt --candidates cand.json         # anywhere

``stage_parts.py`` gives the device time of each step of the timing stage at the task's benchmark size (CUDA
events around repetitions of the sandbox's own code). ``throughput.py``'s candidates part gives what the stages
of its candidates ran (launches of the candidate, how many repeated, rounds) and what the rest cost (correctness
stage, reference worker, profiles). This script multiplies the one by the other:

- the timing stage: each launch of the candidate poisoned, its guard bands and input hashes checked, its output
  hashed (a repeat) or compared; an L2 flush before each timed and warm-up launch; the baseline's warm-up (as many
  launches as the results say it ran, else at least ``WARM_UP_MIN`` launches and ``WARM_UP_MS`` of its time) and
  timed launches, each checked and masked; the vendor's calls (its warm-up counted the same way), each output
  wiped; an input set generated and hashed for the warm-up and each round, the set it replaces
  hashed; the idle buffers hashed twice at each of two fences; the kept launches copied, hashed and handed over;
- the correctness stage at the benchmark size: per trial one input set generated and hashed, two launches with
  their checks, the first run's outputs copied, hashed twice and handed over, the two runs compared byte for byte
  (a copy is its bytes read and written at ``--copy-tbs``);
- the profiles: as measured (ncu's own time, the GPU held);
- the reference worker: its "reference" and "compare" parts as measured, host time included (an upper bound).

Each candidate's own kernel time is not in the throughput JSON; the floor is given for the kernel at the copy
bound of its bytes and at the baseline's time, between which the answers lie. With no host time anywhere, a GPU
busy ``b`` of the time checks at most 3,600 * b / floor candidates an hour.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT)]

STEPS = {"generate": "generate one input set", "hash": "hash the inputs", "poison": "poison the outputs",
         "flush": "L2 flush", "baseline": "the kernel (baseline) launched",
         "guards": "guard bands + input hashes, queued", "agree": "agreement test, queued",
         "mask": "mask a baseline output", "vendor": "the vendor's call"}


class Bad(ValueError):
    """An input file that is not what the script reads (the message names it and what is missing)."""


def read_parts(text: str, where: str) -> dict:
    """stage_parts.py's output: each step's device ms (``STEPS``) and the GiB of inputs and outputs."""
    sizes = re.search(r"inputs ([\d.]+) GiB, outputs ([\d.]+) GiB", text)
    if not sizes:
        raise Bad(f"{where}: no 'inputs N GiB, outputs N GiB' line: not bench/stage_parts.py's output")
    rows = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 2 and re.fullmatch(r"[\d.]+", cells[1]):
            rows[cells[0]] = float(cells[1])
    steps = {key: rows.get(label) for key, label in STEPS.items()}
    missing = [STEPS[k] for k, v in steps.items() if v is None and k != "vendor"]
    if missing:
        raise Bad(f"{where}: no row for {', '.join(repr(m) for m in missing)}")
    return dict(steps, in_gib=float(sizes.group(1)), out_gib=float(sizes.group(2)))


def read_candidates(data: dict, where: str) -> dict:
    """throughput.py's candidates part (the part, or the whole ``--json`` output holding it)."""
    part = data.get("candidates", data) if isinstance(data, dict) else None
    try:
        counts, costs = part["split"]["counts"], part["split"]["costs"]
        n = part["candidates"]
        out = dict(n=n, launches=statistics.fmean(counts["candidate_launches"]),
                   repeated=statistics.fmean(counts["repeated_launches"]), rounds=statistics.fmean(counts["rounds"]),
                   # each implementation's warm-up launches as run, where the results say (else the whole warm-up)
                   warm_up={k[len("warm_up_"):]: statistics.fmean(v) for k, v in counts.items()
                            if k.startswith("warm_up_") and v},
                   busy=part["busy"], per_gpu_hour=part["per_gpu_hour"],
                   measured={k: sum(costs[k]) / n for k in ("time_gpu_s", "check_gpu_s", "reference_s",
                                                            "profile_gpu_s")})
    except (KeyError, TypeError, ZeroDivisionError, statistics.StatisticsError) as exc:
        raise Bad(f"{where}: not bench/throughput.py's candidates part ({type(exc).__name__}: {exc})") from None
    ref = [row for where_, row in (part.get("workers") or {}).items() if where_.startswith("reference worker")]
    out["reference_parts_s"] = sum(row["parts"].get(p, 0.0) for row in ref for p in ("reference", "compare")) / 1e3
    return out


def warm_up(ms: float) -> int:
    from sandbox.worker.timing import WARM_UP_MAX, WARM_UP_MIN, WARM_UP_MS

    return max(WARM_UP_MIN, min(WARM_UP_MAX, math.ceil(WARM_UP_MS / ms)))


def floor(p: dict, c: dict, kernel_ms: float, sets: int, copy_tbs: float, full_checks: int = 3,
          bench_trials: int = 3) -> dict:
    """The device ms of each part of one candidate's checks with its kernel at ``kernel_ms``."""
    copy = 2 * p["out_gib"] * 2**30 / (copy_tbs * 1e12) * 1e3
    hash_out = p["hash"] * p["out_gib"] / p["in_gib"] if p["in_gib"] else p["hash"]
    rounds, launches, repeated = c["rounds"], c["launches"], c["repeated"]
    checked = p["poison"] + kernel_ms + p["guards"]
    ran = c.get("warm_up") or {}
    cand = (launches * checked + repeated * hash_out + (launches - repeated) * p["agree"]
            + (rounds + warm_up(kernel_ms)) * p["flush"])
    base = (ran.get("baseline", warm_up(p["baseline"])) + rounds) * (p["poison"] + p["baseline"] + p["guards"]
                                                                     + p["mask"])
    vendor = ((ran.get("vendor", warm_up(p["vendor"])) + rounds) * (p["vendor"] + p["poison"]) if p["vendor"]
              else 0.0)
    inputs = (1 + rounds) * (p["generate"] + p["hash"]) + rounds * p["hash"]
    idle_gib = (sets - 1) * (p["in_gib"] + 2 * p["out_gib"]) + p["out_gib"]   # other sets; the baseline's output
    fences = 4 * idle_gib * p["hash"] / p["in_gib"] if p["in_gib"] else 0.0
    kept = full_checks * (2 * copy + hash_out)
    timing = cand + base + vendor + inputs + fences + kept
    check = bench_trials * (p["generate"] + p["hash"] + 2 * checked + 3 * copy + 2 * hash_out)
    return dict(candidate=cand, baseline=base, vendor=vendor, inputs=inputs, fences_kept=fences + kept,
                timing=timing, check=check)


def report(p: dict, c: dict, sets: int, copy_tbs: float, kernels: list[float]) -> list[dict]:
    m = c["measured"]
    print(f"{c['n']} candidates: per candidate {c['launches']:.1f} launches ({c['repeated']:.1f} repeated), "
          f"{c['rounds']:.1f} rounds; measured {c['per_gpu_hour']:,.0f} per GPU-hour at {c['busy']:.0%} busy\n")
    print("| the candidate's kernel ms | candidate's launches | baseline | vendor | inputs | fences, kept copies | "
          "timing stage floor | measured (mean) | correctness stage floor at the benchmark size | measured (mean) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    rows = []
    for k in kernels:
        f = floor(p, c, k, sets, copy_tbs)
        rows.append(dict(kernel_ms=k, **f))
        print(f"| {k:.3f} | {f['candidate']:.0f} | {f['baseline']:.0f} | {f['vendor']:.0f} | {f['inputs']:.0f} | "
              f"{f['fences_kept']:.0f} | **{f['timing']:.0f}** | {1e3 * m['time_gpu_s']:.0f} | {f['check']:.0f} | "
              f"{1e3 * m['check_gpu_s']:.0f} |")
    profiles = m["profile_gpu_s"]
    low = min(r["timing"] + r["check"] for r in rows) / 1e3 + profiles
    high = max(r["timing"] + r["check"] for r in rows) / 1e3 + profiles + c["reference_parts_s"]
    print(f"\nProfiles {profiles:.3f} s per candidate (measured); the reference worker's reference and compare parts "
          f"{c['reference_parts_s']:.3f} s (measured, host time included).")
    print(f"A candidate holds the GPU at least {low:.3f} s (the fastest kernel, no reference time) and, with the "
          f"slowest kernel and the reference worker's parts, {high:.3f} s: at {c['busy']:.0%} busy, at most "
          f"{3600 * c['busy'] / low:,.0f} and {3600 * c['busy'] / high:,.0f} candidates an hour with no host time.")
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--parts", type=Path, required=True, help="bench/stage_parts.py's output, saved")
    ap.add_argument("--candidates", type=Path, required=True, help="bench/throughput.py's --json output")
    ap.add_argument("--sets", type=int, default=3, help="rotating sets of the timing stage (default 3)")
    ap.add_argument("--copy-tbs", type=float, default=4.2, help="the device's copy rate, TB/s read+write (default 4.2)")
    ap.add_argument("--kernel-ms", type=float, nargs="*",
                    help="the candidate's kernel times to give the floor at (default: the copy bound of its bytes and "
                         "the baseline's time)")
    args = ap.parse_args(argv)
    if args.sets < 1 or args.copy_tbs <= 0 or any(k <= 0 for k in args.kernel_ms or []):
        ap.error("--sets must be at least 1, --copy-tbs and every --kernel-ms above 0")
    try:
        parts = read_parts(args.parts.read_text(), str(args.parts))
        cands = read_candidates(json.loads(args.candidates.read_text()), str(args.candidates))
    except (OSError, json.JSONDecodeError, Bad) as exc:
        ap.error(str(exc))
    bound = (parts["in_gib"] + parts["out_gib"]) * 2**30 / (args.copy_tbs * 1e12) * 1e3
    report(parts, cands, args.sets, args.copy_tbs, args.kernel_ms or [bound, parts["baseline"]])
    return 0


if __name__ == "__main__":
    sys.exit(main())
