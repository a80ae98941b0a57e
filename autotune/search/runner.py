"""One search process: the trial loop, batched writes to the shared storage, progress and stopping.

Trials run against an in-memory Optuna study (Optuna's storage reads would otherwise dominate a trial that
costs ~1 ms to predict). Finished trials are written to the persistent storage in batches (every
BATCH_TRIALS trials or BATCH_S seconds, and when the search stops for any reason), and the trials other
processes wrote there are folded into the in-memory study at each write, so that several processes on one
storage share what they found; each trial is written once, by the process that ran it.

Schedule of a budget of N trials: TPE for min(0.75 N, TPE_MAX_TRIALS) trials (its per-trial cost grows with
the history, so it is capped), then steepest-ascent refinement of each basin's incumbent (search/refine.py),
alternating with chunks of elite-mutation trials (search/evolve.py, constant cost a trial) until N.
"""

from __future__ import annotations

import math
import sys
import threading
import time
import warnings
from dataclasses import dataclass, field
from typing import Any

from autotune import capability
from autotune.search.admit import Admission
from autotune.search.evolve import EliteMutationSampler
from autotune.search.refine import _basin, _key, refine
from autotune.search.sampler import CachedAdmission, sample_plan
from autotune.specs import Plan, Prediction, to_dict

BATCH_TRIALS = 200
BATCH_S = 2.0
TPE_SHARE = 0.75  # of a small budget; the rest refines the incumbents (search/refine.py)
TPE_MAX_TRIALS = 150  # TPE's cost a trial grows with the history: past this, elite mutation takes over
EXPLORE_SHARE = 0.1  # of the budget: elite-mutation trials between refinement passes
EXPLORE_MIN = 25
REFINE_BASINS = 8  # basins (engine, mode, layouts) whose incumbents are refined
LOOKAHEAD = 16  # completions scored for a refinement move that opens parameters
PROGRESS_S = 0.1


def compact(prediction: Prediction) -> dict[str, Any]:
    """The prediction stored with each trial: everything a report's tables read, without the per-step
    breakdown and rate provenance (those are recomputed for the plans a report draws)."""
    raw = to_dict(prediction)
    raw.pop("steps", None)
    raw.pop("rates", None)
    return raw


@dataclass
class Stop:
    """Why a search stops early: an interrupt (SIGINT) or the deadline of --timeout (time.monotonic)."""

    deadline: float | None = None
    interrupted: threading.Event = field(default_factory=threading.Event)

    def timed_out(self) -> bool:
        return self.deadline is not None and time.monotonic() >= self.deadline

    def __call__(self) -> bool:
        return self.interrupted.is_set() or self.timed_out()


class Progress:
    """One line on stderr, rewritten in place: trials done, best so far, ETA. Silent unless enabled."""

    def __init__(self, total: int, enabled: bool, deadline: float | None = None, stream=None) -> None:
        self.total, self.enabled, self.deadline = total, enabled, deadline
        self.stream = stream or sys.stderr
        self.started = time.monotonic()
        self.shown = 0.0

    def update(self, done: int, best: float, force: bool = False) -> None:
        now = time.monotonic()
        if not self.enabled or (not force and now - self.shown < PROGRESS_S):
            return
        self.shown = now
        elapsed = now - self.started
        eta = elapsed / done * (self.total - done) if done else float("nan")
        if self.deadline is not None:
            eta = min(eta, max(0.0, self.deadline - now)) if done else self.deadline - now
        width = 24
        filled = int(width * done / self.total) if self.total else width
        best_text = f"{best:,.0f} tok/s" if best > 0 else "-"
        eta_text = f"{eta:.0f} s" if math.isfinite(eta) else "?"
        self.stream.write(
            f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{self.total} trials  best {best_text}  ETA {eta_text} "
        )
        self.stream.flush()

    def close(self) -> None:
        if self.enabled and self.shown:
            self.stream.write("\n")
            self.stream.flush()


class Session:
    """The trials of one process: `budget` new trials, tagged with the run id and this worker's tag."""

    def __init__(self, req, choices, persistent, stop: Stop, budget: int | None = None, tag: str = "") -> None:
        """`budget` None: the request's trials less those this run (req.run_id; or the whole study when it
        has no run id) already holds in the storage, so a finished search resumed runs 0 new trials."""
        import optuna

        self.req, self.choices, self.persistent, self.stop = req, choices, persistent, stop
        self.tag = tag or f"{req.run_id}/0"
        self.admission = CachedAdmission(Admission(capability.box_facts(req.hardware, req.model)))
        self.memory = optuna.create_study(study_name=req.study_name, direction="maximize")
        self.evolve = EliteMutationSampler(seed=req.seed + req.worker)
        self.memo: dict[tuple, tuple[Prediction, dict[str, Any], float]] = {}  # params key -> prediction
        self.scored: dict[tuple, float] = {}
        self.by_label: dict[str, tuple[Prediction, dict[str, Any], float]] = {}  # plan label -> _predict's answer
        self.seen: set[tuple] = set()
        self.basins: dict[tuple, Any] = {}
        self.converged: set[int] = set()  # incumbents (memory trial numbers) at a local optimum
        self.best = 0.0
        self.ran = 0
        self.pending: list = []
        self.flushed_at = time.monotonic()
        self.pull_cost = 0.0
        self.pulled_at = 0.0
        self.known: set[int] = set()  # persistent trial ids folded into the in-memory study
        self.own_before = 0  # this run's trials already in the storage
        self.phases: dict[str, int] = {"tpe": 0, "refine": 0, "mutation": 0}
        if persistent is not None:
            self._pull(initial=True)
        self.budget = max(0, req.trials - self.own_before) if budget is None else budget
        self.progress = Progress(self.budget, req.progress, stop.deadline)

    # ------------------------------------------------------------------ bookkeeping
    def _track(self, trial) -> None:
        if trial.value is None:
            return
        self.seen.add(_key(trial.params))
        self.evolve.observe((trial,))
        if trial.value > 0:
            basin = _basin(trial)
            held = self.basins.get(basin)
            if held is None or (trial.value, -trial.number) > (held.value, -held.number):
                self.basins[basin] = trial
            self.best = max(self.best, trial.value)

    def incumbents(self) -> list:
        """The REFINE_BASINS best basins' incumbents, best first: refining every layout's basin would score
        ~80 neighbours per move in each of hundreds of (mostly hopeless) basins."""
        return sorted(self.basins.values(), key=lambda t: (-t.value, t.number))[:REFINE_BASINS]

    def stopped(self) -> bool:
        return self.stop()

    def _pull(self, initial: bool = False) -> None:
        """Fold the storage's finished trials that this process did not run into the in-memory study."""
        started = time.monotonic()
        fresh = []
        for t in self.persistent.get_trials(deepcopy=False):
            if t._trial_id in self.known or not t.state.is_finished():
                continue
            self.known.add(t._trial_id)
            if initial and (not self.req.run_id or t.user_attrs.get("run") == self.req.run_id):
                self.own_before += 1
            if initial or t.user_attrs.get("worker") != self.tag:
                fresh.append(t)
        if fresh:
            self.memory.add_trials(fresh)
            for t in self.memory.get_trials(deepcopy=False)[-len(fresh) :]:
                self._track(t)
        self.pulled_at = time.monotonic()
        self.pull_cost = self.pulled_at - started

    def flush(self) -> None:
        if self.persistent is None:
            return
        if self.pending:
            self.persistent.add_trials(self.pending)
            self.pending = []
        self.flushed_at = time.monotonic()
        if self.flushed_at - self.pulled_at > max(BATCH_S, 10 * self.pull_cost):  # reads stay a small share
            self._pull()

    def _after_trial(self, study, trial) -> None:
        self.ran += 1
        self._track(trial)
        if self.persistent is not None:
            self.pending.append(trial)
            if len(self.pending) >= BATCH_TRIALS or time.monotonic() - self.flushed_at > BATCH_S:
                self.flush()
        self.progress.update(self.ran, self.best)
        if self.ran >= self.budget or self.stop():
            study.stop()

    # ------------------------------------------------------------------ objective
    def objective(self, trial) -> float:
        def suggest(name: str, options: tuple[Any, ...]) -> Any:
            return options[0] if len(options) == 1 else trial.suggest_categorical(name, list(options))

        req = self.req
        plan, reason = sample_plan(req.space, self.choices, suggest, req.num_gpus, self.admission)
        key = _key(trial.params)
        hit = self.memo.get(key)
        if hit is None:
            hit = self.memo[key] = self._predict(plan, reason)
        prediction, attrs, value = hit
        for name, attr in attrs.items():
            trial.set_user_attr(name, attr)
        trial.set_user_attr("run", req.run_id)
        trial.set_user_attr("worker", self.tag)
        return value

    def _predict(self, plan: Plan | None, reason: str) -> tuple[Prediction, dict[str, Any], float]:
        """The plan's prediction and trial attributes, memoised by plan label (a label shows every non-default
        setting: one label per plan), so parameter sets that build the same plan are predicted once."""
        from autotune.search.study import _evaluate, objective_value

        label = plan.describe() if plan is not None else None
        if label is not None and label in self.by_label:
            return self.by_label[label]
        prediction = _evaluate(self.req, plan, reason)
        attrs = {
            "plan": to_dict(plan) if plan else None,
            "reason": prediction.reason,
            "prediction": compact(prediction),
        }
        out = prediction, attrs, objective_value(prediction)
        if label is not None:
            self.by_label[label] = out
        return out

    def score(self, params: dict[str, Any]) -> float:
        """A candidate's objective without a trial: refinement moves to the best untried neighbour.

        A move can bring in parameters the candidate does not set (expert_parallel=true asks for eplb; a new
        layout changes the values the engine admits): up to LOOKAHEAD completions of those are scored and the
        best is kept, so a move is judged with its best follow-up and the trial (`complete`) runs exactly it."""
        key = _key(params)
        if key not in self.scored:
            best: tuple[float, dict[str, Any]] = (-1.0, params)
            for completed, plan, reason in self._completions(params):
                value = self._predict(plan, reason)[2]
                if value > best[0]:
                    best = (value, completed)
            self.scored[key] = best
        return self.scored[key][0]

    def complete(self, params: dict[str, Any]) -> dict[str, Any]:
        """The scored completion of a candidate (every parameter its plan asks for)."""
        self.score(params)
        return self.scored[_key(params)][1]

    def _completions(self, params: dict[str, Any]):
        """(asked parameters, plan, reason) for each assignment of the parameters `params` leaves open, depth
        first over the sampler's own decisions (at most LOOKAHEAD)."""
        path: list[list[int]] = []  # [index chosen, options offered] per open decision
        for _ in range(LOOKAHEAD):
            asked: dict[str, Any] = {}
            depth = 0

            def suggest(name: str, options: tuple[Any, ...], asked: dict[str, Any] = asked) -> Any:
                nonlocal depth
                if name in params and params[name] in options:
                    value = params[name]
                else:
                    if depth == len(path):
                        path.append([0, len(options)])
                    path[depth][1] = len(options)
                    value = options[path[depth][0]]
                    depth += 1
                if len(options) > 1:
                    asked[name] = value
                return value

            plan, reason = sample_plan(self.req.space, self.choices, suggest, self.req.num_gpus, self.admission)
            yield asked, plan, reason
            del path[depth:]
            while path and path[-1][0] + 1 >= path[-1][1]:
                path.pop()
            if not path:
                return
            path[-1][0] += 1

    # ------------------------------------------------------------------ schedule
    def _optimize(self, sampler, n: int, phase: str) -> None:
        import optuna

        if n <= 0 or self.stop():
            return
        self.memory.sampler = sampler
        before = self.ran
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            self.memory.optimize(self.objective, n_trials=n, callbacks=[self._after_trial], gc_after_trial=False)
        self.phases[phase] += self.ran - before

    def run(self) -> None:
        import optuna

        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                tpe = optuna.samplers.TPESampler(
                    seed=self.req.seed + self.req.worker,
                    multivariate=True,
                    group=True,
                    n_startup_trials=max(10, min(self.budget, TPE_MAX_TRIALS) // 10),
                )
            self._optimize(tpe, min(math.ceil(self.budget * TPE_SHARE), TPE_MAX_TRIALS), "tpe")
            chunk = max(EXPLORE_MIN, math.ceil(self.budget * EXPLORE_SHARE))
            while self.ran < self.budget and not self.stop():
                before = self.ran
                self.memory.sampler = self.evolve
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                    refine(self.memory, self.objective, self.budget - self.ran, [self._after_trial], self.score, self)
                self.phases["refine"] += self.ran - before
                self._optimize(self.evolve, min(chunk, self.budget - self.ran), "mutation")
        finally:
            self.flush()
            self.progress.update(self.ran, self.best, force=True)
            self.progress.close()

    def strategy(self) -> str:
        done = {k: v for k, v in self.phases.items() if v}
        names = {"tpe": "TPE", "refine": "steepest-ascent refinement", "mutation": "elite mutation"}
        return " + ".join(f"{names[k]} ({v})" for k, v in done.items()) or "no new trials"
