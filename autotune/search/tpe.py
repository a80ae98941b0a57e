"""Optuna's TPE sampler with two costs per trial cut and the same proposals (search/runner.py's TPE phase).

With `group=True`, TPE (optuna 5.1 samplers/_tpe/sampler.py) at every trial
- rebuilds the group decomposition of the search space from every finished trial
  (search_space/group_decomposed.py `calculate` loops over the whole history), and
- splits the history into good and bad trials (`_split_trials`) once per group of parameters, although the
  history and the split are the same for every group of one trial.
The decomposition is a partition refinement: adding a trial's parameters a second time changes nothing (each
group either lies inside them or outside), so adding only the trials not yet seen gives the same groups in the
same order. The split of one trial's sampling is computed once and shared by its groups. Both are exact:
`tests/search/test_tpe.py` checks the proposals against the stock sampler's, trial by trial.
"""

from __future__ import annotations

import copy
from typing import Any

import optuna.samplers._tpe.sampler as _tpe_module
from optuna.samplers import TPESampler
from optuna.search_space.group_decomposed import _GroupDecomposedSearchSpace
from optuna.trial import TrialState


class _IncrementalGroups(_GroupDecomposedSearchSpace):
    """The group decomposition of the finished trials, updated with the trials not seen before."""

    def __init__(self, include_pruned: bool = False) -> None:
        super().__init__(include_pruned)
        self._added: set[int] = set()  # trial numbers whose parameters are in the groups

    def calculate(self, study, use_cache: bool = False):
        if self._study_id is None:
            self._study_id = study._study_id
        elif self._study_id != study._study_id:
            raise ValueError("`_GroupDecomposedSearchSpace` cannot handle multiple studies.")
        states = (TrialState.COMPLETE, TrialState.PRUNED) if self._include_pruned else (TrialState.COMPLETE,)
        for trial in study._get_trials(deepcopy=False, states=states, use_cache=use_cache):
            if trial.number not in self._added:
                self._added.add(trial.number)
                self._search_space.add_distributions(trial.distributions)
        return copy.deepcopy(self._search_space)


class FastTPESampler(TPESampler):
    """TPESampler(group=True) whose per-trial cost no longer scans the history once per parameter group."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if self._group_decomposed_search_space is not None:
            self._group_decomposed_search_space = _IncrementalGroups(True)  # TPESampler's own include_pruned

    def sample_relative(self, study, trial, search_space):
        split = _tpe_module._split_trials
        shared: dict[tuple, tuple] = {}

        def split_once(study, trials, n_below):
            # one trial's sampling: the same history for every group (no trial finishes meanwhile)
            key = (n_below, len(trials), trials[-1].number if trials else -1)
            if key not in shared:
                shared[key] = split(study, trials, n_below)
            below, above = shared[key]
            return list(below), list(above)

        _tpe_module._split_trials = split_once
        try:
            return super().sample_relative(study, trial, search_space)
        finally:
            _tpe_module._split_trials = split
