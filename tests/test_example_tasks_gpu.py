"""The example tasks on a real device: each baseline is ok at every check size and its benchmark size, and timed
A/B against itself and its vendor implementation (a short timing stage: correctness is the point)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sandbox import GPUSandbox, SandboxConfig, Status, load_candidate, load_task

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "tasks"
NAMES = ["argmax", "conv1d_bias_relu", "cross_entropy", "gemm_nt", "maxpool2d"]


@pytest.mark.gpu
@pytest.mark.timeout(1200)
def test_every_example_baseline_is_ok_with_its_vendor_timed_beside_it():
    config = SandboxConfig(check_timeout_s=300, time_timeout_s=300, timing_budget_s=0.05, max_rounds=12,
                           full_checks=1)
    problems, lines = [], []
    with GPUSandbox(config) as sb:
        for name in NAMES:
            task = load_task(EXAMPLES / name)
            result = sb.evaluate(task, load_candidate(task.baseline_path))
            lines.append(f"{name}: {result.summary()}")
            if result.status is not Status.ok:
                problems.append(f"{name}: {result.status.value}: {result.error}\n{result.detail}")
                continue
            checked = {c.label.split()[0].split("#")[0] for c in result.checks}
            missing = {"benchmark", *(f"check[{i}]" for i in range(len(task.spec.sizes.check)))} - checked
            if missing or not all(c.passed for c in result.checks):
                problems.append(f"{name}: checks missing {sorted(missing)} or failed")
            if "vendor" not in result.timing.impls:
                problems.append(f"{name}: the vendor implementation was not timed")
            timed = result.env.clocks_timed.sm_clock_mhz if result.env.clocks_timed else None
            if timed and timed.samples != result.timing.rounds * len(result.timing.impls):
                problems.append(f"{name}: {timed.samples} clock readings for {result.timing.rounds} rounds")
    print("\n".join(lines))
    assert not problems, "\n".join(problems)
