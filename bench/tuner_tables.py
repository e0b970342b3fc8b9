"""The tables ``bench/tuner.py`` prints: each strategy's gap to the exhaustive best, per case and per strategy."""

from __future__ import annotations

import kernel_tuner_sim as kts  # bench/, beside this file; Kernel Tuner itself is imported on use


def print_table(rows: list[dict], fraction: float, seeds: int) -> None:
    pct = f"{fraction:.0%}"
    print()
    print(f"Replayed on the cached measurements (simulation mode, {seeds} seeds per strategy; no GPU time spent "
          f"on the comparison). Budget: {pct} of the exhaustive evaluations; duplicates free for every strategy.")
    head = ["case", "space", "evals", "exhaustive best ms", "start ms", f"default@{pct} ms", "gap", "worst",
            "<=5%", "evals used", f"random@{pct} ms", "gap", "worst", "<=5%", "GPU-s"]
    lines = [head]
    for r in rows:
        d, q = r["default"], r["random"]
        lines.append([r["case"], str(r["space"]), f"{r['evaluations']} ({r['failed']} failed)", f"{r['best_ms']:.4f}",
                      f"{r['start_ms']:.4f}", f"{d['mean_ms']:.4f}", f"{d['mean_gap']:.2f}%", f"{d['worst_gap']:.1f}%",
                      f"{d['within_5']:.0%}", f"{d['mean_evaluations']:.1f}/{r['budget']}", f"{q['mean_ms']:.4f}",
                      f"{q['mean_gap']:.2f}%", f"{q['worst_gap']:.1f}%", f"{q['within_5']:.0%}", f"{r['gpu_s']:.0f}"])
    print_rows(lines)
    print()
    print("space: declared configurations (knobs x flags); evals: distinct configurations the exhaustive search "
          "measures (same machine code and launch plan measured once; compile errors are free and not counted); "
          "gap: mean over seeds of the best found vs the exhaustive best, in time relative to the baseline timed A/B "
          "in the same measurement; worst: the worst seed; <=5%: seeds within 5%; GPU-s: GPU time of the exhaustive "
          "measurements (check + time stages). Each configuration was measured once: the exhaustive best is the "
          "minimum of noisy medians.")
    for r in rows:
        print(f"  {r['case']}: exhaustive best {r['best_config']} ({r['compile_failed']} configurations failed to "
              f"compile or launch before running; measured by the {r['protocol']} protocol)")
        c = r["confirmed"]
        if c and c["speedup"]:
            v, lo, hi = c["speedup"]
            print(f"    evaluated in full by the sandbox: {c['status']}, {c['ms']:.4f} ms, {v:.3f}x [{lo:.3f}, {hi:.3f}] "
                  "vs the task's baseline")
        elif c:
            print(f"    evaluated in full by the sandbox: {c['status']}: {c['error']}")
    met = [r for r in rows if r["default"]["mean_gap"] <= 5]
    print(f"target (default strategy within 5% of the exhaustive best at {pct} of its evaluations, mean over seeds): "
          f"met on {len(met)} of {len(rows)} cases")


def print_strategy_table(rows: list[dict], fraction: float, seeds: int, ours: tuple[str, ...],
                         kt_strategies: list[str]) -> None:
    pct = f"{fraction:.0%}"
    print(f"\nEvery strategy at {pct} of the exhaustive evaluations, {seeds} seeds each:")
    if kt_strategies:
        print(f"(Kernel Tuner {kts.version()}'s strategies replayed on the same cache in its simulation mode, its space "
              "restricted to the distinct configurations that compiled, so an evaluation means the same for both)")
    head = ["case", "strategy", "mean ms", "gap", "worst", "<=5%", "evals used"]
    lines = [head]
    for r in rows:
        for name, d in [*((f"kernelwright {s}", r[s]) for s in ours),
                        *((f"kernel_tuner {s}", r["kernel_tuner"][s]) for s in kt_strategies)]:
            lines.append([r["case"], name, f"{d['mean_ms']:.4f}", f"{d['mean_gap']:.2f}%", f"{d['worst_gap']:.1f}%",
                          f"{d['within_5']:.0%}", f"{d['mean_evaluations']:.1f}/{r['budget']}"])
    print_rows(lines, left=2)


def print_rows(lines: list[list[str]], left: int = 1) -> None:
    """A plain-text table: the first line is the head; the first ``left`` columns are left-aligned."""
    widths = [max(len(l[i]) for l in lines) for i in range(len(lines[0]))]
    for i, l in enumerate(lines):
        print("  ".join(c.ljust(w) if j < left else c.rjust(w) for j, (c, w) in enumerate(zip(l, widths))))
        if i == 0:
            print("  ".join("-" * w for w in widths))
