"""A batch of trials written to a journal file costs one fsync, and another reader sees every trial
(search/storage.py deferred_sync)."""

from __future__ import annotations

import os

import optuna

from autotune.search import storage as stores


def _trials(n: int) -> list:
    dist = optuna.distributions.CategoricalDistribution([1, 2, 3])
    return [
        optuna.trial.create_trial(params={"x": 1 + i % 3}, distributions={"x": dist}, value=float(i)) for i in range(n)
    ]


def test_a_batch_is_synced_once_and_read_by_another_process(tmp_path, monkeypatch):
    url = f"journal:{tmp_path / 'study.journal'}"
    study = optuna.create_study(study_name="s", storage=stores.open_storage(url), direction="maximize")
    synced = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: synced.append(fd) or real(fd))
    with stores.deferred_sync(study):
        study.add_trials(_trials(20))
    assert len(synced) == 1  # one sync for the batch, at its end
    study.add_trials(_trials(3))
    assert len(synced) == 4  # outside a batch: optuna's own sync, one a trial
    other = optuna.load_study(study_name="s", storage=stores.open_storage(url))  # a fresh reader of the file
    assert [t.value for t in other.get_trials()] == [float(i) for i in range(20)] + [0.0, 1.0, 2.0]


def test_other_storages_are_left_alone(tmp_path):
    study = optuna.create_study(storage=f"sqlite:///{tmp_path / 's.db'}")
    with stores.deferred_sync(study):
        study.add_trials(_trials(2))
    assert len(study.get_trials()) == 2
