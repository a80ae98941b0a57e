"""Local refinement after TPE: move the best plan so far by single-dimension changes.

The performance model is cheap and deterministic, so a coordinate search around the incumbent finds what
TPE's sampling misses in a large conditional space. With a `score` (the objective without a trial), each
refinement trial is the best untried neighbour, and a basin whose best neighbour does not improve on its
incumbent is a local optimum: steepest ascent, one trial per move. It is stateless (derived from the trials
already in the study), so an interrupted search resumes it where it stopped.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any


def _key(params: dict[str, Any]) -> tuple:
    return tuple(sorted((k, repr(v)) for k, v in params.items()))


def neighbours(trial) -> Iterator[dict[str, Any]]:
    """Parameter sets that differ from `trial` in one categorical parameter, in a fixed order."""
    for name in sorted(trial.params):
        for value in trial.distributions[name].choices:
            if value != trial.params[name]:
                yield {**trial.params, name: value}


# Dimensions whose values draw on one budget, so that changing the first pays off only together with one of its
# partners: vLLM's scheduler schedules each running request's draft tokens within the step's token budget
# (max_num_batched_tokens, the plan's chunked_prefill_tokens; vllm/v1/core/sched/scheduler.py:721-735 and
# 856-863), so more drafts per step (speculative) need a larger budget or fewer running sequences. One-dimension
# moves see each change alone: a speculation move loses throughput at the old budget, a budget move changes
# nothing without speculation, and the basin looks converged where the pair gains (seed 0 of the quickstart:
# 55,292 -> 74,713 screened tok/s).
COUPLED = {"speculative": ("chunked_prefill_tokens", "max_running")}


def coupled_neighbours(trial) -> Iterator[dict[str, Any]]:
    """Parameter sets that change a COUPLED dimension and move one of its partners in the same phase to a value
    next to its own (the partners' choices are ordered budgets: once the pair has crossed, further budget steps
    are single moves that gain), in a fixed order."""
    params, dists = trial.params, trial.distributions
    for name in sorted(params):
        phase, _, dim = name.rpartition(".")
        for partner in COUPLED.get(dim, ()):
            other = f"{phase}.{partner}" if phase else partner
            if other not in params:
                continue
            options = dists[other].choices
            at = options.index(params[other])
            steps = [options[i] for i in (at - 1, at + 1) if 0 <= i < len(options)]
            for value in dists[name].choices:
                if value != params[name]:
                    yield from ({**params, name: value, other: peer} for peer in steps)


def _basin(trial) -> tuple:
    """(engine, mode, each phase's layout): one-dimension moves rarely cross a layout profitably (a new layout
    changes which values the engine admits for the rest), so each layout's best plan is refined on its own."""
    plan = trial.user_attrs.get("plan") or {}
    phases = plan.get("phases") or {}
    layouts = tuple(
        (name, phase.get("tp", 1), phase.get("dp", 1), phase.get("pp", 1)) for name, phase in sorted(phases.items())
    )
    return plan.get("engine"), plan.get("mode"), layouts


def incumbents(trials) -> list:
    """The best feasible trial of each basin (_basin), best first."""
    best: dict[tuple, Any] = {}
    for t in sorted((t for t in trials if t.value is not None and t.value > 0), key=lambda t: (-t.value, t.number)):
        best.setdefault(_basin(t), t)
    return list(best.values())


def refined_basins(basins: dict[tuple, Any], limit: int) -> list:
    """The incumbents refinement moves, in order (basins: a _basin -> best trial map): the best basin, then the
    best basin of each engine and mode that has none among the `limit` best, best first, then the rest of the
    `limit` best. No move leaves an (engine, mode), and refinement takes basins in turn to a local optimum: when
    the sampler settled on one engine's layouts, the other engines' best plans were never moved (refined last,
    or not at all). Refining every layout's basin would score ~80 neighbours per move in hundreds of mostly
    hopeless basins."""
    ranked = sorted(basins.items(), key=lambda kv: (-kv[1].value, kv[1].number))
    held = {basin[:2] for basin, _ in ranked[:limit]}
    heads: dict[tuple, Any] = {}
    for basin, t in ranked[limit:]:
        if basin[:2] not in held:
            heads.setdefault(basin[:2], t)
    top = [t for _, t in ranked[:limit]]
    return top[:1] + list(heads.values()) + top[1:]


def next_candidate(
    trials,
    score: Callable[[dict[str, Any]], float] | None = None,
    seen: set[tuple] | None = None,
    best: list | None = None,
    converged: set[int] | None = None,
    prefetch: Callable[[list[dict[str, Any]], dict[str, Any]], None] | None = None,
) -> dict[str, Any] | None:
    """An untried neighbour of an incumbent, or None when every incumbent is a local optimum.

    Incumbents are the best trial of each basin (engine, mode and layouts): one-dimension moves cannot leave
    an (engine, mode) basin (a disaggregated plan shares no parameters with an aggregated one), and rarely
    leave a layout profitably. The best basin is refined first, to a
    local optimum, then the next: with ~25 dimensions an incumbent has ~80 neighbours, and taking basins in
    turn left the winning one unconverged within the refinement budget.

    An incumbent with no gaining single move is offered the coupled pairs (coupled_neighbours) before it counts
    as a local optimum. A long search passes `seen` (keys of the parameter sets tried) and `best` (the
    incumbents) kept up to date as trials finish, so that a move does not rescan the whole history, and
    `converged`: the trial numbers of incumbents found to be local optima (tried neighbours only grow, so they
    stay optima). `prefetch` (optional) is handed each incumbent's untried neighbours and its parameters before
    `score` is asked about each: it may score them all at once (search/pool.py), as long as `score` then
    answers what it would have answered alone."""
    if best is None:
        best = incumbents(trials)
    if seen is None:
        seen = {_key(t.params) for t in trials}
        seen |= {_key(t.system_attrs["fixed_params"]) for t in trials if "fixed_params" in t.system_attrs}
    for incumbent in best:  # best first
        if converged is not None and incumbent.number in converged:
            continue
        for moves in (neighbours, coupled_neighbours):  # the pairs only where no single move gains
            untried = [p for p in moves(incumbent) if _key(p) not in seen]
            if score is None:
                if untried:
                    return untried[0]
                continue
            if prefetch is not None:
                prefetch(untried, incumbent.params)
            scored = [(score(p), k) for k, p in enumerate(untried)]
            top = max(scored, default=None, key=lambda sk: (sk[0], -sk[1]))  # ties: the first in neighbour order
            if top is not None and top[0] > incumbent.value:
                return untried[top[1]]
        if converged is not None:
            converged.add(incumbent.number)
    return None


def refine(study, objective, budget: int, callbacks=(), score=None, state=None) -> int:
    """Run up to `budget` refinement trials; returns how many ran (fewer at a local optimum, or when
    `state.stopped()`). `state` (optional) keeps `seen` and `best` current as trials finish."""
    ran = 0
    while ran < budget and not (state is not None and state.stopped()):
        if state is None:
            candidate = next_candidate(study.get_trials(deepcopy=False), score)
        else:
            candidate = next_candidate((), score, state.seen, state.incumbents(), state.converged, state.prefetch)
        if candidate is None:
            break
        if state is not None:
            state.seen.add(_key(candidate))
            candidate = state.complete(candidate)  # with the follow-up values it was scored with
            state.seen.add(_key(candidate))
        study.enqueue_trial(candidate, skip_if_exists=state is None)
        study.optimize(objective, n_trials=1, callbacks=list(callbacks))
        ran += 1
    return ran
