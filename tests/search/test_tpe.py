"""FastTPESampler proposes exactly what optuna's TPESampler(group=True) proposes (search/tpe.py)."""

from __future__ import annotations

import optuna
import pytest

from autotune.search.tpe import FastTPESampler


def _objective(trial) -> float:
    # a conditional space: the groups of parameters change with the first choice, as in mi-tune's space
    engine = trial.suggest_categorical("engine", ["a", "b", "c"])
    x = trial.suggest_categorical(f"{engine}.x", [1, 2, 3, 4])
    y = trial.suggest_categorical("y", [0, 1])
    if engine == "b":
        z = trial.suggest_categorical("b.z", ["p", "q", "r"])
        if z == "r":
            return -1.0  # some trials fail the way infeasible plans score
        return x * 2.0 + y + len(z)
    return x + y * 3.0


def _history(sampler_cls, seed: int, **kwargs) -> list[dict]:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    sampler = sampler_cls(seed=seed, multivariate=True, group=True, n_startup_trials=5, **kwargs)
    study = optuna.create_study(direction="maximize", sampler=sampler)
    study.optimize(_objective, n_trials=40)
    return [t.params for t in study.trials]


@pytest.mark.filterwarnings("ignore::optuna.exceptions.ExperimentalWarning")
@pytest.mark.parametrize("lazy", [False, True])
@pytest.mark.parametrize("seed", [0, 3])
def test_same_proposals_as_stock_tpe(seed, lazy):
    stock = _history(optuna.samplers.TPESampler, seed)
    assert _history(FastTPESampler, seed, lazy_groups=lazy) == stock
    assert len({tuple(sorted(p.items())) for p in stock}) > 10  # the stock sampler explored: the check bites


@pytest.mark.filterwarnings("ignore::optuna.exceptions.ExperimentalWarning")
def test_lazy_groups_draw_only_the_groups_a_trial_asks_for(monkeypatch):
    """The stock sampler draws every group at every trial; the lazy one only those of the parameters asked (the
    three engines' groups are never asked together), with the same proposals (test above)."""
    drawn = {False: 0, True: 0}
    sample = FastTPESampler._sample

    for lazy in (False, True):

        def counting(self, study, trial, search_space, lazy=lazy):
            drawn[lazy] += 1
            return sample(self, study, trial, search_space)

        monkeypatch.setattr(FastTPESampler, "_sample", counting)
        _history(FastTPESampler, 0, lazy_groups=lazy)
    assert 0 < drawn[True] < 0.8 * drawn[False]


@pytest.mark.filterwarnings("ignore::optuna.exceptions.ExperimentalWarning")
def test_split_is_restored_after_sampling():
    import optuna.samplers._tpe.sampler as tpe_module

    before = tpe_module._split_trials
    _history(FastTPESampler, 1)
    assert tpe_module._split_trials is before
