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
sampler's, trial by trial (`lazy_groups=False`).

With `lazy_groups` (the search's setting), a group is sampled only when the trial asks for one of its
parameters: TPESampler samples every group of the decomposition (~32 in mi-tune's conditional space) although a
trial asks for the parameters of ~6 (one engine, one mode, the names its engine rules give). The proposals stay
the stock sampler's: a group of categorical parameters draws a fixed count of uniforms from the shared stream
(`_MixtureOfProductDistribution.sample`: `rng.choice(..., size=n_ei_candidates)`, then `rng.rand(n_ei_candidates)`
per parameter, optuna 5.1 samplers/_tpe/probability_distributions.py), so at the trial's first question the
stream is advanced past every group in order, keeping each group's starting state, and an asked group is drawn
later from its own starting state.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import optuna.samplers._tpe.sampler as _tpe_module
from optuna.distributions import CategoricalDistribution
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

    def __init__(self, lazy_groups: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._lazy = lazy_groups and self._group_decomposed_search_space is not None
        self._replay = np.random.RandomState(0)  # a group's draw, from the stream state it starts at
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
        if not self._lazy:
            return self._sample_groups(study, trial, search_space)
        trials = study._get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED), use_cache=True)
        if len(trials) < self._n_startup_trials:  # TPESampler._sample_relative: independent random sampling
            return {}
        groups = []
        for sub_space in self._search_space_group.search_spaces:  # as TPESampler.sample_relative builds them
            group = {n: d for n, d in sorted(sub_space.items()) if not d.single() and n in search_space}
            if group:
                groups.append(group)
        if not all(isinstance(d, CategoricalDistribution) for group in groups for d in group.values()):
            return self._sample_groups(study, trial, search_space)  # a numerical draw's count is not fixed
        rng, starts = self._rng.rng, []
        for group in groups:  # where the stock sampler's draw of each group starts, and the stream after them all
            starts.append(rng.get_state())
            rng.random_sample(self._n_ei_candidates * (1 + len(group)))
        return _LazyGroups(self, study, trial, groups, starts)

    def _sample_group(self, study, trial, group: dict, start: tuple, split_memo: dict) -> dict[str, Any]:
        """TPESampler._sample of one group, drawn from the stream state `start`, with the trial's shared split."""
        saved_rng, saved_split = self._rng, _tpe_module._split_trials
        self._replay.set_state(start)
        self._rng = _Stream(self._replay)
        _tpe_module._split_trials = _split_once(saved_split, split_memo)
        try:
            return self._sample(study, trial, group)
        finally:
            self._rng, _tpe_module._split_trials = saved_rng, saved_split

    def _sample_groups(self, study, trial, search_space):
        split = _tpe_module._split_trials
        _tpe_module._split_trials = _split_once(split, {})
        try:
            return super().sample_relative(study, trial, search_space)
        finally:
            _tpe_module._split_trials = split


def _split_once(split, shared: dict):
    """_split_trials computed once for one trial's sampling: the history is the same for every group (no trial
    finishes meanwhile)."""

    def split_once(study, trials, n_below):
        key = (n_below, len(trials), trials[-1].number if trials else -1)
        if key not in shared:
            shared[key] = split(study, trials, n_below)
        below, above = shared[key]
        return list(below), list(above)

    return split_once


class _Stream:
    """Stands in for TPESampler's LazyRandomState: `.rng` is a given RandomState."""

    def __init__(self, rng: np.random.RandomState) -> None:
        self.rng = rng


class _LazyGroups(dict):
    """A trial's relative parameters, each group sampled when the trial first asks for one of its parameters.
    Optuna's Trial reads relative_params only with `in` and `[]` (trial/_trial.py `_is_relative_param`,
    `_suggest`)."""

    def __init__(self, sampler: FastTPESampler, study, trial, groups: list[dict], starts: list[tuple]) -> None:
        super().__init__()
        self._sampler, self._study, self._trial, self._groups, self._starts = sampler, study, trial, groups, starts
        self._owner = {name: i for i, group in enumerate(groups) for name in group}
        self._split: dict[tuple, tuple] = {}

    def __contains__(self, name: object) -> bool:
        return name in self._owner

    def __getitem__(self, name: str) -> Any:
        if not dict.__contains__(self, name):
            i = self._owner[name]
            self.update(
                self._sampler._sample_group(self._study, self._trial, self._groups[i], self._starts[i], self._split)
            )
        return dict.__getitem__(self, name)

    def __bool__(self) -> bool:
        return bool(self._owner)
