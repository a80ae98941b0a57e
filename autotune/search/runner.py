"""One search process: the trial loop, batched writes to the shared storage, progress and stopping.

Trials run against an in-memory Optuna study (Optuna's storage reads would otherwise dominate a trial that
costs ~1 ms to predict). Finished trials are written to the persistent storage in batches (every
BATCH_TRIALS trials or BATCH_S seconds, and when the search stops for any reason), and the trials other
processes wrote there are folded into the in-memory study at each write, so that several processes on one
storage share what they found; each trial is written once, by the process that ran it.

Schedule of a budget of N trials: TPE for min(0.75 N, TPE_MAX_TRIALS) trials (its per-trial cost grows with
the history, so it is capped), then steepest-ascent refinement of each basin's incumbent (search/refine.py),
alternating with chunks of elite-mutation trials (search/evolve.py, constant cost a trial) until N.

A resumed run is the same search: the schedule and the samplers are deterministic given the seed and the
trials, so a session that finds this run's trials in the storage replays them (re-drawing each proposal with
the same sampler streams, checking it against the stored trial, writing nothing) and continues from the
exact state (phase, basins, elites, random streams) the interrupted session had. A proposal whose plan is
already in the study is not spent as a trial (not counted, not written) unless the sampler draws nothing new
REPEATS_MAX times in a row (a space nearly exhausted).
"""

from __future__ import annotations

import hashlib
import math
import sys
import threading
import time
import warnings
from dataclasses import dataclass, field
from typing import Any

from autotune import capability
from autotune.search import storage
from autotune.search.admit import Admission
from autotune.search.evolve import EliteMutationSampler
from autotune.search.pool import NeighbourScoring
from autotune.search.refine import _basin, _key, refine, refined_basins
from autotune.search.sampler import CachedAdmission, sample_plan
from autotune.search.trial import compact, evaluate_or_reason, objective_value
from autotune.specs import Plan, Prediction, to_dict

BATCH_TRIALS = 200
BATCH_S = 2.0
TPE_SHARE = 0.75  # of a small budget; the rest refines the incumbents (search/refine.py)
TPE_MAX_TRIALS = 150  # TPE's cost a trial grows with the history: past this, elite mutation takes over
EXPLORE_SHARE = 0.1  # of the budget: elite-mutation trials between refinement passes
EXPLORE_MIN = 25
REFINE_BASINS = 8  # best basins (engine, mode, layouts) refined, with each engine and mode's best (refine.py)
LOOKAHEAD = 16  # completions scored for a refinement move that opens parameters
PROGRESS_S = 0.1
REPEATS_MAX = 50  # proposals in a row already in the study before one is spent anyway
AHEAD_AFTER = 20  # trials before scoring ahead starts (the first ones are random: incumbents change fast)


def sampler_seed(req) -> int:
    """This process's sampler seed: seed + worker index; on a shared storage (req.stream, the run id) a stream
    derived from the seed and the run, so that independent processes on one study draw different proposals."""
    if not req.stream:
        return req.seed + req.worker
    digest = hashlib.sha256(f"{req.seed}/{req.stream}/{req.worker}".encode()).digest()
    return int.from_bytes(digest[:4], "big")


@dataclass
class Stop:
    """Why a search stops early: an interrupt (SIGINT or SIGTERM, `signum`) or the deadline of --timeout."""

    deadline: float | None = None
    interrupted: threading.Event = field(default_factory=threading.Event)
    signum: int = 0

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

    def __init__(
        self, req, choices, persistent, stop: Stop, budget: int | None = None, tag: str = "", scorers: int = 0
    ) -> None:
        """`budget` None: this run's trials (req.trials; req.run_id's, or the whole study's when it has no run
        id), those already in the storage replayed first, so a finished search resumed runs 0 new trials.
        `scorers`: processes that score refinement neighbours (search/pool.py); 0: pool.processes_wanted()."""
        import optuna

        self.req, self.choices, self.persistent, self.stop = req, choices, persistent, stop
        self.tag = tag or f"{req.run_id}/0"
        self.admission = CachedAdmission(Admission(capability.box_facts(req.hardware, req.model)))
        self.memory = optuna.create_study(study_name=req.study_name, direction="maximize")
        self.evolve = EliteMutationSampler(seed=sampler_seed(req))
        self.memo: dict[tuple, tuple[Prediction, dict[str, Any], float]] = {}  # params key -> prediction
        self.scored: dict[tuple, float] = {}
        self.seen: set[tuple] = set()  # parameter sets tried or claimed by a refinement move
        self.spent: set[tuple] = set()  # parameter sets of the study's trials
        self.by_label: dict[str, tuple[Prediction, dict[str, Any], float]] = {}  # plan label -> _predict's answer
        self.basins: dict[tuple, Any] = {}
        self.converged: set[int] = set()  # incumbents (memory trial numbers) at a local optimum
        self.best = 0.0
        self.ran = 0  # trials of this run counted, replayed ones included
        self.new = 0  # trials this session ran and wrote
        self.repeats = 0  # proposals in a row already in the study
        self.replay: list = []  # this run's stored trials, in order, still to replay
        self.replayed = 0
        self.diverged = -1  # trial (of this run) where a replay found another proposal than the stored one
        self.pending: list = []
        self.flushed_at = time.monotonic()
        self.pull_cost = 0.0
        self.pulled_at = 0.0
        self.known: set[int] = set()  # persistent trial ids folded into the in-memory study
        self.own_before = 0  # this run's trials already in the storage
        self.phases: dict[str, int] = {"tpe": 0, "refine": 0, "mutation": 0}
        self.scoring = NeighbourScoring(self, scorers)  # refinement's scoring on every core (search/pool.py)
        self.refining = False
        if persistent is not None:
            self._pull(initial=True, replay=budget is None)
        if budget is None:
            self.budget = req.trials if self.replay else max(0, req.trials - self.own_before)
        else:
            self.budget = budget
        self.progress = Progress(self.budget, req.progress, stop.deadline)

    # ------------------------------------------------------------------ bookkeeping
    def _track(self, trial) -> None:
        if trial.value is None or trial.user_attrs.get("repeat"):
            return
        self.seen.add(_key(trial.params))
        self.spent.add(_key(trial.params))
        self.evolve.observe((trial,))
        if trial.value > 0:
            basin = _basin(trial)
            held = self.basins.get(basin)
            if held is None or (trial.value, -trial.number) > (held.value, -held.number):
                self.basins[basin] = trial
            self.best = max(self.best, trial.value)

    def incumbents(self) -> list:
        """The incumbents refinement moves (search/refine.py refined_basins), best first."""
        return refined_basins(self.basins, REFINE_BASINS)

    def stopped(self) -> bool:
        """Stop refining: an interrupt or the deadline, or the run's budget reached (a resumed run's replay can
        fold the rest of its stored trials in at once: refinement's own count then overstates what is left)."""
        return self.stop() or self.ran >= self.budget

    def _pull(self, initial: bool = False, replay: bool = False) -> None:
        """Fold the storage's finished trials that this process did not run into the in-memory study. With
        `replay` (the first pull of a resumed run), this run's own trials are queued to be replayed instead."""
        started = time.monotonic()
        fresh, own = [], []
        for t in self.persistent.get_trials(deepcopy=False):
            if t._trial_id in self.known or not t.state.is_finished():
                continue
            self.known.add(t._trial_id)
            mine = initial and (not self.req.run_id or t.user_attrs.get("run") == self.req.run_id)
            self.own_before += mine
            if mine:
                own.append(t)
            elif initial or t.user_attrs.get("worker") != self.tag:
                fresh.append(t)
        if replay and 0 < len(own) < self.req.trials:
            self.replay = sorted(own, key=lambda t: t.number)
        else:
            fresh = sorted(fresh + own, key=lambda t: t.number)
        self._fold(fresh)
        self.pulled_at = time.monotonic()
        self.pull_cost = self.pulled_at - started

    def _fold(self, trials) -> None:
        if trials:
            self.memory.add_trials(trials)
            for t in self.memory.get_trials(deepcopy=False)[-len(trials) :]:
                self._track(t)

    def flush(self) -> None:
        if self.persistent is None:
            return
        if self.pending:
            with storage.deferred_sync(self.persistent):  # one fsync a batch on a journal file
                self.persistent.add_trials(self.pending)
            self.pending = []
        self.flushed_at = time.monotonic()
        if self.flushed_at - self.pulled_at > max(BATCH_S, 10 * self.pull_cost):  # reads stay a small share
            self._pull()

    def _after_trial(self, study, trial) -> None:
        if trial.user_attrs.get("repeat"):  # a plan already in the study: not spent
            if self.stop():
                study.stop()
            return
        self.ran += 1
        self._track(trial)
        if trial.user_attrs.get("replayed"):
            self.replayed += 1
            self.replay.pop(0)
        elif self.persistent is not None:
            self.new += 1
            self.pending.append(trial)
            if len(self.pending) >= BATCH_TRIALS or time.monotonic() - self.flushed_at > BATCH_S:
                self.flush()
        else:
            self.new += 1
        if self.replay and self.diverged >= 0:  # the rest of the stored run is kept as it is
            self.ran += len(self.replay)
            self._fold(self.replay)
            self.replay = []
        self.progress.update(self.ran, self.best)
        if not self.refining and self.ran >= AHEAD_AFTER:
            self.scoring.score_ahead()
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
        for name, attr in self._attrs(attrs, prediction).items():
            trial.set_user_attr(name, attr)
        if key in self.spent and self.repeats < REPEATS_MAX:
            self.repeats += 1
            trial.set_user_attr("repeat", True)
            return value
        self.repeats = 0
        if self.replay and self.diverged < 0:
            if key == _key(self.replay[0].params):
                trial.set_user_attr("replayed", True)
                return value
            self.diverged = self.ran
        trial.set_user_attr("run", req.run_id)
        trial.set_user_attr("worker", self.tag)
        return value

    def _predict(self, plan: Plan | None, reason: str) -> tuple[Prediction, dict[str, Any], float]:
        """The plan's prediction and trial attributes, memoised by plan label (a label shows every non-default
        setting: one label per plan), so parameter sets that build the same plan are predicted once. The
        attributes (the plan and prediction as plain data) are filled in when the plan becomes a trial
        (`_attrs`): most predictions only score a refinement move."""

        label = plan.describe() if plan is not None else None
        if label is not None and label in self.by_label:
            return self.by_label[label]
        prediction = evaluate_or_reason(self.req, plan, reason)
        out = prediction, {"plan": plan}, objective_value(prediction)
        if label is not None:
            self.by_label[label] = out
        return out

    @staticmethod
    def _attrs(attrs: dict[str, Any], prediction: Prediction) -> dict[str, Any]:
        """A trial's attributes, converted once in place (the memo's entries share this dict)."""
        if "prediction" not in attrs:
            plan = attrs["plan"]
            attrs.update(plan=to_dict(plan) if plan else None, reason=prediction.reason, prediction=compact(prediction))
        return attrs

    def score(self, params: dict[str, Any]) -> float:
        """A candidate's objective without a trial: refinement moves to the best untried neighbour.

        A move can bring in parameters the candidate does not set (expert_parallel=true asks for eplb; a new
        layout changes the values the engine admits): up to LOOKAHEAD completions of those are scored and the
        best is kept, so a move is judged with its best follow-up and the trial (`complete`) runs exactly it."""
        key = _key(params)
        if key not in self.scored:
            self.scored[key] = self._best_completion(params)
        return self.scored[key][0]

    def _best_completion(self, params: dict[str, Any]) -> tuple[float, dict[str, Any]]:
        """(score, the completion scored) of a candidate: a pure function of `params` (the memos it fills are
        caches), so a forked copy of this session answers it as this one would (search/pool.py)."""
        best: tuple[float, dict[str, Any]] = (-1.0, params)
        for completed, plan, reason in self._completions(params):
            value = self._predict(plan, reason)[2]
            if value > best[0]:
                best = (value, completed)
        return best

    def prefetch(self, candidates: list[dict[str, Any]], incumbent: dict[str, Any]) -> None:
        """Score a move's candidates on every scoring process before refinement asks `score` about each."""
        self.scoring.prefetch(candidates, incumbent)

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
        target = min(self.ran + n, self.budget)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            while self.ran < target and not self.stop():  # proposals already in the study are not counted
                self.memory.optimize(
                    self.objective, n_trials=target - self.ran, callbacks=[self._after_trial], gc_after_trial=False
                )
        self.phases[phase] += self.ran - before

    def run(self) -> None:
        import optuna

        from autotune.search.tpe import FastTPESampler

        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                tpe = FastTPESampler(
                    lazy_groups=True,
                    seed=sampler_seed(self.req),
                    multivariate=True,
                    group=True,
                    n_startup_trials=max(10, min(self.budget, TPE_MAX_TRIALS) // 10),
                )
            self._optimize(tpe, min(math.ceil(self.budget * TPE_SHARE), TPE_MAX_TRIALS), "tpe")
            chunk = max(EXPLORE_MIN, math.ceil(self.budget * EXPLORE_SHARE))
            self.refining = True
            while self.ran < self.budget and not self.stop():
                before = self.ran
                self.memory.sampler = self.evolve
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                    refine(self.memory, self.objective, self.budget - self.ran, [self._after_trial], self.score, self)
                self.phases["refine"] += self.ran - before
                self._optimize(self.evolve, min(chunk, self.budget - self.ran), "mutation")
        finally:
            self.scoring.close()
            self.flush()
            self.progress.update(self.ran, self.best, force=True)
            self.progress.close()

    def strategy(self) -> str:
        """The schedule of the whole run (replayed trials included), and how a resumed run was continued."""
        if not self.new:
            return "no new trials"
        done = {k: v for k, v in self.phases.items() if v}
        names = {"tpe": "TPE", "refine": "steepest-ascent refinement", "mutation": "elite mutation"}
        text = " + ".join(f"{names[k]} ({v})" for k, v in done.items())
        if self.diverged >= 0:
            text += (
                f"; resumed: the stored run differs from this search from its trial {self.diverged} (another seed, "
                "space or mi-tune version), its trials kept as they are"
            )
        elif self.replayed:
            text += f"; resumed after {self.replayed} trials, replayed to the same state"
        return text
