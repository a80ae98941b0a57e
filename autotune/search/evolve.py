"""A sampler whose cost per trial does not grow with the study: mutation of the best trials so far.

TPE rebuilds its Parzen estimators from the whole history at every trial, so a long search costs more than
linearly. After TPE has located the good regions, each trial here copies one of the `elites` best distinct
trials and re-draws one or two of its parameters (a different value each), or, with probability `fresh`,
draws every parameter at random (a restart). The elite list is updated as trials finish: O(elites) a trial.
"""

from __future__ import annotations

import math
import random
from typing import Any

from optuna.samplers import BaseSampler

ELITES = 8
FRESH = 0.15  # share of trials that are random restarts (new regions, other engines and modes)


def _key(params: dict[str, Any]) -> tuple:
    return tuple(sorted((k, repr(v)) for k, v in params.items()))


class EliteMutationSampler(BaseSampler):
    def __init__(self, seed: int = 0, elites: int = ELITES, fresh: float = FRESH) -> None:
        self._rng = random.Random(seed)
        self._size = elites
        self._fresh = fresh
        self._elites: list[tuple[float, int, dict[str, Any]]] = []  # (value, number, params), best first
        self._keys: set[tuple] = set()
        self._plans: dict[int, tuple[dict[str, Any] | None, frozenset[str]]] = {}  # trial -> (parent, mutated)

    # trials finished elsewhere (TPE phase, refinement, other processes) are offered here as well
    def observe(self, trials) -> None:
        for t in trials:
            if t.value is not None:
                self._offer(t.value, t.number, t.params)

    def _offer(self, value: float, number: int, params: dict[str, Any]) -> None:
        if value <= 0 or not math.isfinite(value):
            return
        if len(self._elites) == self._size and value <= self._elites[-1][0]:
            return
        key = _key(params)
        if key in self._keys:
            return
        self._elites.append((value, number, dict(params)))
        self._elites.sort(key=lambda e: (-e[0], e[1]))
        self._keys.add(key)
        if len(self._elites) > self._size:
            self._keys.discard(_key(self._elites.pop()[2]))

    def infer_relative_search_space(self, study, trial):
        return {}

    def sample_relative(self, study, trial, search_space):
        return {}

    def before_trial(self, study, trial) -> None:
        if not self._elites or self._rng.random() < self._fresh:
            self._plans[trial.number] = (None, frozenset())
            return
        parent = self._rng.choice(self._elites)[2]
        names = sorted(parent)
        count = min(len(names), 1 + (self._rng.random() < 0.5))
        self._plans[trial.number] = (parent, frozenset(self._rng.sample(names, count)))

    def sample_independent(self, study, trial, param_name, param_distribution):
        choices = param_distribution.choices
        parent, mutated = self._plans.get(trial.number, (None, frozenset()))
        if parent is not None and param_name in parent and parent[param_name] in choices:
            if param_name not in mutated or len(choices) == 1:
                return parent[param_name]
            others = [c for c in choices if c != parent[param_name]]
            return others[self._rng.randrange(len(others))]
        return choices[self._rng.randrange(len(choices))]

    def after_trial(self, study, trial, state, values) -> None:
        self._plans.pop(trial.number, None)
        if values:
            self._offer(values[0], trial.number, trial.params)
