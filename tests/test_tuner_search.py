"""Search strategies on simulated, deterministic objectives (no compiler, no GPU)."""

from __future__ import annotations

import math
import statistics

import pytest

from agent.tune.search import INF, Search, Space, SharedEvaluations, minimize
from agent.tune.strategies import STRATEGIES
from tuner_fakes import basins_space, basins_time, gemm_space, gemm_time

pytestmark = pytest.mark.timeout(120)


def _run(space, f, strategy, budget, seed, patience=None, key_of=None):
    search = Search(space, strategy, budget=budget, seed=seed, start=tuple(0 for _ in space.choices), patience=patience)
    return minimize(search, key_of or (lambda p: p), lambda key: f(space, key))


def test_space_enumerates_every_point_once_in_row_major_order():
    space = Space(("a", "b"), ((1, 2, 3), ("x", "y")))
    points = list(space.points())
    assert points == [(0, 0), (0, 1), (1, 0), (1, 1), (2, 0), (2, 1)]
    assert space.size == 6
    assert space.decode((2, 1)) == {"a": 3, "b": "y"}
    assert space.line((1, 0), 0) == [(0, 0), (2, 0)]


def test_exhaustive_finds_the_true_optimum():
    space = gemm_space()
    truth = min(gemm_time(space, p) for p in space.points())
    search = _run(space, gemm_time, "exhaustive", None, seed=0)
    assert search.best[1] == truth
    assert search.evaluations == space.size


@pytest.mark.slow  # the Gaussian-process model over many seeds: up to 74 CPU-s for one case
@pytest.mark.parametrize("strategy, seeds", [("default", 12), ("bayes", 6)])
@pytest.mark.parametrize("space,f", [(gemm_space(), gemm_time), (basins_space(), basins_time)], ids=["gemm", "basins"])
def test_a_guided_strategy_beats_random_at_equal_budget_on_average_over_seeds(space, f, strategy, seeds):
    budget = math.ceil(0.05 * space.size)
    guided = statistics.mean(_run(space, f, strategy, budget, s).best[1] for s in range(seeds))
    random_ = statistics.mean(_run(space, f, "random", budget, s).best[1] for s in range(seeds))
    assert guided < random_


@pytest.mark.slow  # five searches of 346 points with the model
def test_default_gets_within_five_percent_of_the_optimum_at_a_fifth_of_the_space():
    space = gemm_space()
    truth = min(gemm_time(space, p) for p in space.points())
    budget = math.ceil(0.2 * space.size)
    for seed in range(5):
        assert _run(space, gemm_time, "default", budget, seed).best[1] <= truth * 1.05


@pytest.mark.parametrize("strategy", sorted(STRATEGIES))
def test_no_strategy_spends_more_than_its_budget(strategy):
    space = gemm_space()
    search = _run(space, gemm_time, strategy, 17, seed=3)
    assert search.evaluations == 17
    assert "budget" in search.stop_reason


@pytest.mark.parametrize("strategy", sorted(STRATEGIES))
def test_the_start_configuration_is_evaluated_first(strategy):
    space = gemm_space()
    start = (1, 1, 1, 1, 1, 0)
    search = Search(space, strategy, budget=5, seed=0, start=start)
    assert search.ask() == [start]


def test_same_seed_gives_the_same_search():
    space = gemm_space()
    runs = [list(_run(space, gemm_time, "default", 40, seed=7).memory.values) for _ in range(2)]
    assert runs[0] == runs[1]
    assert runs[0] != list(_run(space, gemm_time, "default", 40, seed=8).memory.values)


def test_duplicates_share_one_evaluation():
    space = gemm_space()
    measured = []

    def measure(key):
        measured.append(key)
        return float(key)

    # only BM and BK change the code: every other dimension is a duplicate of some earlier build
    search = Search(space, "exhaustive", seed=0)
    minimize(search, lambda p: p[0] * 10 + p[2], measure)
    assert len(measured) == len(set(measured)) == 4 * 3
    assert search.evaluations == 12
    assert len(search.memory.values) == space.size


def test_failures_found_before_running_are_kept_free_and_passed_over():
    space = gemm_space()
    infeasible = {p for p in space.points() if gemm_time(space, p) == INF}
    search = Search(space, "default", budget=60, seed=1)
    minimize(search, lambda p: None if p in infeasible else p, lambda p: gemm_time(space, p))
    failed = [p for p, v in search.memory.values.items() if v == INF]
    assert failed and set(failed) <= infeasible
    assert search.best[1] < INF
    assert search.evaluations == 60


def test_failed_evaluations_are_values_the_search_moves_past():
    space = basins_space()
    search = _run(space, lambda s, p: INF if p[0] == 0 else basins_time(s, p), "default", 40, seed=2)
    assert search.memory.value((0, 0, 0, 0, 0)) == INF
    assert search.best[1] < INF and search.best[0][0] != 0


def test_patience_stops_early_against_the_current_best():
    space = gemm_space()
    search = _run(space, lambda s, p: 5.0, "default", 500, seed=0, patience=12)
    assert search.evaluations == 13   # the first value sets the best; twelve more fail to beat it
    assert search.stop_reason.startswith("stopped early")


def test_ask_waits_while_handed_out_points_have_no_value():
    space = gemm_space()
    search = Search(space, "default", budget=50, seed=0)
    shared = SharedEvaluations(search)
    first = search.ask()
    assert first and search.ask() == []
    assert not search.finished
    for p in first:
        assert shared.route(p, p)
        shared.resolve(p, 1.0)
    assert search.ask()


def test_unknown_strategy_is_one_clear_error():
    with pytest.raises(ValueError, match="unknown search strategy 'annealing'.*default"):
        Search(gemm_space(), "annealing")



def test_bayes_is_seeded_and_scores_a_sample_of_a_large_space(monkeypatch):
    import agent.tune.strategies as strategies

    monkeypatch.setattr(strategies, "BAYES_FULL_SPACE", 100)  # the gemm space (1728 points) is "large" now
    space = gemm_space()
    runs = [list(_run(space, gemm_time, "bayes", 30, seed=4).memory.values) for _ in range(2)]
    assert runs[0] == runs[1] and len(runs[0]) >= 30
    truth = min(gemm_time(space, p) for p in space.points())
    assert _run(space, gemm_time, "bayes", 60, seed=4).best[1] <= truth * 1.15


def test_the_surrogate_fits_what_it_saw_and_ranks_by_expected_improvement():
    import numpy as np

    from agent.tune.surrogate import GaussianProcess, expected_improvement, positions

    assert list(positions((256, 128, 512, 1024))) == pytest.approx([1 / 3, 0, 2 / 3, 1])  # numeric: by value
    assert list(positions(("-O3", "-O1", "-O2"))) == pytest.approx([0, 0.5, 1])     # others: as declared
    x = np.linspace(0, 1, 9)[:, None]
    y = (x[:, 0] - 0.7) ** 2
    gp = GaussianProcess(x, y)
    mu, sigma = gp.predict(x)
    assert mu == pytest.approx(y, abs=0.02) and (sigma < 0.05).all()
    grid = np.array([[0.0], [0.69], [0.5]])
    ei = expected_improvement(*gp.predict(grid), best=float(y.min()))
    assert ei.argmax() == 1 and ei[0] < ei[2]


def test_the_models_picks_hold_the_held_dimensions_as_the_best_has_them():
    import random

    from agent.tune.points import Memory
    from agent.tune.strategies import _ExpectedImprovement

    space = Space(("k", "f1", "f2"), ((1, 2, 3, 4, 5, 6), (0, 1), (0, 1, 2)), held=(1, 2))
    memory = Memory()
    for p, v in [((0, 0, 0), 3.0), ((1, 1, 2), 2.0), ((2, 1, 2), 1.5), ((3, 0, 1), 2.5)]:
        memory.record(p, v)
    model, rng = _ExpectedImprovement(space), random.Random(0)
    picks = set()
    while (p := model.pick(memory, rng, memory.best_point)) is not None:
        assert p[1:] == (1, 2) and p not in memory
        picks.add(p)
        memory.record(p, 2.2)
    assert picks == {(k, 1, 2) for k in (0, 3, 4, 5)}   # every knob value with the best's options, then none left


def test_the_surrogate_fits_and_predicts_on_one_blas_thread_whatever_the_process_allows(monkeypatch):
    import numpy as np
    from threadpoolctl import threadpool_info, threadpool_limits

    from agent.tune import surrogate

    seen = []
    real = surrogate._matern52

    def matern52(*args):
        seen.append({i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"})
        return real(*args)

    monkeypatch.setattr(surrogate, "_matern52", matern52)
    x = np.linspace(0, 1, 9)[:, None]
    with threadpool_limits(limits=2, user_api="blas"):
        gp = surrogate.GaussianProcess(x, (x[:, 0] - 0.7) ** 2)
        gp.predict(x)
        after = {i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"}
    assert seen and all(s == {1} for s in seen), seen
    assert after == {2}   # the process's own setting is back once the model is done
