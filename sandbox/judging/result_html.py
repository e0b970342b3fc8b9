"""A ``Result`` as an HTML fragment: Jupyter's ``Result._repr_html_`` and the per-candidate part of
``kernelwright report``. Jinja2 with autoescaping: every string of a result (compiler logs, errors, names
a model chose) is escaped. ``view`` is the flat dict the template receives, with numbers already
formatted."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from ..tasks.task import describe_sizes
from .result import Result

TEMPLATES = Path(__file__).with_name("templates")
DETAIL_CHARS = 20000
FAILED_CHECKS_SHOWN = 10


@lru_cache(maxsize=1)
def _template():
    import jinja2

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    return env.get_template("result.html.j2")


def result_html(result: Result) -> str:
    return _template().render(r=view(result))


def _num(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def view(r: Result) -> dict:
    detail = r.detail if len(r.detail) <= DETAIL_CHARS else r.detail[:DETAIL_CHARS] + f"\n[... {len(r.detail) - DETAIL_CHARS} more characters]"
    out = {"candidate": r.candidate, "status": r.status.value, "ok": r.ok, "error": r.error, "detail": detail,
           "simulated": r.env.simulated, "knobs": ", ".join(f"{k}={v}" for k, v in r.knobs.items()),
           "flags": " ".join(r.flags), "gpu": r.env.gpu or "", "compile": None, "checks": None, "timing": None,
           "cost": {"compile_s": _num(r.cost.compile_s, ".3f"), "gpu_s": _num(r.cost.gpu_s, ".3f"),
                    "wall_s": _num(r.cost.wall_s, ".3f")},
           "diagnosis": r.profile.diagnosis if r.profile else "",
           "profile_note": r.profile.note() if r.profile else ""}
    if r.compile:
        c = r.compile
        out["compile"] = {"ok": c.ok, "arch": c.arch, "nvrtc": c.nvrtc_version, "seconds": _num(c.seconds, ".2f"), "cached": c.cached,
                          "kernels": [{"name": k.name, "registers": "-" if k.registers is None else str(k.registers),
                                       "spills": f"{k.spill_stores}/{k.spill_loads}", "stack": str(k.stack_frame),
                                       "shared": str(k.static_shared)} for k in c.kernels.values()]}
    if r.checks:
        failed = r.failed_checks()
        out["checks"] = {
            "total": len(r.checks), "passed": len(r.checks) - len(failed),
            "sizes": list(dict.fromkeys(describe_sizes(c.sizes) for c in r.checks)),
            "distributions": list(dict.fromkeys(c.distribution for c in r.checks)),
            "failed": [{"label": c.label, "sizes": describe_sizes(c.sizes), "output": c.output,
                        "distribution": c.distribution, "max_abs": _num(c.max_abs_error, ".3g"),
                        "max_rel": _num(c.max_rel_error, ".3g"), "mismatches": str(c.mismatches),
                        "first": (f"[{', '.join(map(str, c.first_mismatch.index))}]: got {c.first_mismatch.got}, "
                                  f"expected {c.first_mismatch.expected}") if c.first_mismatch else "",
                        "note": c.note} for c in failed[:FAILED_CHECKS_SHOWN]],
            "failed_more": max(0, len(failed) - FAILED_CHECKS_SHOWN)}
    if r.timing:
        t = r.timing
        out["timing"] = {
            "sizes": describe_sizes(t.sizes), "rounds": t.rounds, "rotating_sets": t.rotating_sets,
            "l2_flush": f"{t.l2_flush_bytes / 2**20:.0f} MiB" if t.l2_flush_bytes else "none",
            "roofline_ms": _num(t.roofline_ms, ".4g"), "bound": t.bound or "-",
            "impls": [{"name": name, "median": _num(i.median_ms, ".4g"), "low": _num(i.ci_ms.low, ".4g"),
                       "high": _num(i.ci_ms.high, ".4g"), "wall": _num(i.wall_median_ms, ".4g"),
                       "pct": _num(i.pct_of_roofline, ".1f"), "samples": len(i.samples_ms)} for name, i in t.impls.items()],
            "speedups": [{"over": name, "value": f"{s.value:.3f}", "low": f"{s.low:.3f}", "high": f"{s.high:.3f}",
                          "faster": s.low > 1.0, "slower": s.high < 1.0} for name, s in t.speedup.items()]}
    return out
