"""Optuna's TPE sampler with two costs per trial cut and the same proposals (search/runner.py's TPE phase).

With `group=True`, TPE (optuna 5.1 samplers/_tpe/sampler.py) at every trial
- rebuilds the group decomposition of the search space from every finished trial
  (search_space/group_decomposed.py `calculate` loops over the whole history), and
- splits the history into good and bad trials (`_split_trials`) once per group of parameters, although the
  history and the split are the same for every group of one trial.
The decomposition is a partition refinement: adding a trial's parameters a second time changes nothing (each
group either lies inside them or outside), so adding only the trials not yet seen gives the same groups in the
same order. The split of one trial's sampling is computed once and shared by its groups. Two more per-trial
costs go: the decomposition is handed out as a shallow copy (add_distributions builds new dicts and never
changes the old ones, so the deep copy protects nothing), and a finished trial's internal representation
(`_get_internal_repr`: the index of each categorical value) is computed once per group of parameters, not at
every later trial. All are exact: `tests/search/test_tpe.py` checks the proposals against the stock
sampler's, trial by trial.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import optuna.samplers._tpe.sampler as _tpe_module
from optuna.samplers import TPESampler
from optuna.search_space.group_decomposed import _GroupDecomposedSearchSpace, _SearchSpaceGroup
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
        snapshot = _SearchSpaceGroup()
        snapshot._search_spaces = list(self._search_space.search_spaces)  # its dicts are never changed in place
        return snapshot


class FastTPESampler(TPESampler):
    """TPESampler(group=True) whose per-trial cost no longer scans the history once per parameter group."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if self._group_decomposed_search_space is not None:
            self._group_decomposed_search_space = _IncrementalGroups(True)  # TPESampler's own include_pruned
        self._rows: dict[tuple, dict[int, tuple | None]] = {}  # (study, group names) -> trial -> internal repr

    def _get_internal_repr(self, trials, search_space, study) -> dict[str, np.ndarray]:
        """TPESampler._get_internal_repr, each finished trial's row of a group computed once."""
        names = tuple(search_space)
        rows = self._rows.setdefault((study._study_id, names), {})
        kept = []
        for trial in trials:
            row = rows.get(trial.number, rows) if trial.state.is_finished() else rows
            if row is rows:  # not memoised (or a running trial: its parameters can still grow)
                params = self._get_params(trial, study)
                row = None
                if search_space.keys() <= params.keys():
                    row = tuple(search_space[name].to_internal_repr(params[name]) for name in names)
                if trial.state.is_finished():
                    rows[trial.number] = row
            if row is not None:
                kept.append(row)
        return {name: np.asarray([row[i] for row in kept]) for i, name in enumerate(names)}

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
