from types import SimpleNamespace

import optuna

from autotune.search.refine import coupled_neighbours, next_candidate, refine, refined_basins


def test_refine_walks_to_the_local_optimum_of_a_separable_objective():
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(direction="maximize", sampler=optuna.samplers.RandomSampler(seed=0))

    def objective(trial):
        x = trial.suggest_categorical("x", [0, 1, 2, 3, 4])
        y = trial.suggest_categorical("y", [0, 1, 2, 3, 4])
        return 20.0 - (x - 3) ** 2 - (y - 1) ** 2

    study.enqueue_trial({"x": 0, "y": 4})
    study.optimize(objective, n_trials=1)
    ran = refine(study, objective, budget=40)
    assert study.best_params == {"x": 3, "y": 1}
    assert ran < 40  # it stopped at the optimum: every neighbour had been tried
    assert next_candidate(study.get_trials()) is None


def test_no_candidate_without_a_feasible_trial():
    study = optuna.create_study(direction="maximize")
    study.optimize(lambda t: 0.0 * t.suggest_categorical("x", [1, 2]), n_trials=2)
    assert next_candidate(study.get_trials()) is None


def _token_budget_study():
    """Speculation pays off only with a larger token budget: the draft tokens of every running sequence are
    scheduled within it (refine.COUPLED). Alone, the speculation move loses and the budget move ties."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(direction="maximize", sampler=optuna.samplers.RandomSampler(seed=0))

    def value(params):
        spec, budget = params["both.speculative"], params["both.chunked_prefill_tokens"]
        if spec == "none":
            return 10.0 + 0.1 * params["both.max_running"] / 1024
        return 20.0 if budget >= 16384 else 9.0

    def objective(trial):
        trial.suggest_categorical("both.speculative", ["none", "dspark/5"])
        trial.suggest_categorical("both.chunked_prefill_tokens", [4096, 8192, 16384])
        trial.suggest_categorical("both.max_running", [512, 1024])
        return value(trial.params)

    study.enqueue_trial({"both.speculative": "none", "both.chunked_prefill_tokens": 8192, "both.max_running": 1024})
    study.optimize(objective, n_trials=1)
    return study, objective, value


def test_a_speculation_move_carries_the_token_budget_with_it():
    study, objective, value = _token_budget_study()
    refine(study, objective, budget=10, score=value)
    assert study.best_params["both.speculative"] == "dspark/5"
    assert study.best_value == 20.0


def test_coupled_pairs_only_once_no_single_move_gains():
    study, objective, value = _token_budget_study()
    trials = study.get_trials()
    pairs = list(coupled_neighbours(trials[0]))
    assert {(p["both.speculative"], p["both.chunked_prefill_tokens"], p["both.max_running"]) for p in pairs} == {
        ("dspark/5", 4096, 1024),
        ("dspark/5", 16384, 1024),
        ("dspark/5", 8192, 512),
    }  # the partner moves one step either way
    converged: set[int] = set()
    first = next_candidate(trials, value, converged=converged)
    assert first == {"both.speculative": "dspark/5", "both.chunked_prefill_tokens": 16384, "both.max_running": 1024}
    assert not converged


def test_each_engine_and_mode_keeps_its_best_basin_among_the_refined():
    def basin(engine, mode, tp):
        return engine, mode, (("both", tp, 1, 1),)

    trial = SimpleNamespace
    basins = {basin("sglang", "aggregated", tp): trial(value=100.0 - tp, number=tp) for tp in range(1, 10)}
    basins[basin("vllm", "aggregated", 1)] = trial(value=50.0, number=20)
    basins[basin("vllm", "aggregated", 2)] = trial(value=40.0, number=21)
    basins[basin("sglang", "disaggregated", 1)] = trial(value=30.0, number=22)
    chosen = [t.number for t in refined_basins(basins, limit=3)]
    assert chosen == [1, 20, 22, 2, 3]  # the best, the best of each engine and mode not among the 3 best, the rest
    basins[basin("vllm", "aggregated", 4)] = trial(value=98.5, number=23)
    assert [t.number for t in refined_basins(basins, limit=3)] == [1, 22, 23, 2]
