import optuna

from autotune.search.refine import next_candidate, refine


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
