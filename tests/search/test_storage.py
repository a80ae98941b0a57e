"""Study storages: URL parsing, SQLite / journal / PostgreSQL shared by several processes, --workers."""

import builtins
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from urllib.parse import urlsplit

import optuna
import pytest
import yaml

from autotune.catalog import load_model, load_preset
from autotune.cli import run
from autotune.search import SearchRequest, load_space, run_study
from autotune.search import storage as stores
from autotune.specs import MiTuneError, Workload, load_best

W = Workload(isl=2048, osl=512)
SEARCH = ["search", "--model", "deepseek-v4.1-flash", "--preset", "rtx-pro-6000-x8", "--isl", "2048", "--osl", "512"]
POSTGRES_ENV = "MI_TUNE_TEST_POSTGRES_URL"


def test_urls_are_normalised_to_absolute_paths(tmp_path):
    assert stores.normalize("sqlite:///a/s.db", tmp_path) == f"sqlite:///{tmp_path / 'a' / 's.db'}"
    assert stores.normalize("runs/s.journal", tmp_path) == f"journal:{tmp_path / 'runs' / 's.journal'}"
    assert stores.normalize("x.log", tmp_path) == f"journal:{tmp_path / 'x.log'}"
    assert stores.normalize(f"journal:{tmp_path}/j", tmp_path) == f"journal:{tmp_path / 'j'}"
    assert stores.normalize("sqlite:////abs/s.db", tmp_path) == "sqlite:////abs/s.db"


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("bogus://x", "unknown scheme 'bogus'"),
        ("postgresql://u@h:notaport/db", "cannot parse"),
        ("study.db", "expected sqlite:///PATH, journal:PATH"),
        ("sqlite://relative.db", "expected sqlite:///PATH"),
        ("journal:", "expected journal:PATH"),
        ("  ", "empty"),
    ],
)
def test_bad_storage_urls_name_the_flag(url, words, tmp_path):
    with pytest.raises(MiTuneError, match="--storage: ") as caught:
        stores.normalize(url, tmp_path)
    assert words in str(caught.value)


def test_postgresql_without_its_driver_says_how_to_install_it(monkeypatch):
    real_import = builtins.__import__

    def no_psycopg(name, *args, **kwargs):
        if name == "psycopg":
            raise ImportError("No module named 'psycopg'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_psycopg)
    with pytest.raises(MiTuneError, match=r"--storage: PostgreSQL needs the psycopg driver .*pip install"):
        stores.normalize("postgresql://mi@127.0.0.1:5432/mitune")


def test_cli_bad_storage_is_one_line_exit_2(tmp_path, capsys):
    assert run([*SEARCH, "--trials", "5", "--storage", "bogus://x", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("mi-tune: error: --storage:") and "\n" not in err


def test_manifest_records_a_relative_storage_that_follows_the_run_dir(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    url = f"journal:{run_dir / 'study.journal'}"
    rel = stores.relative_storage(url, run_dir)
    assert rel == "study.journal"
    manifest = stores.Manifest(run_id="abc", study="s", storage=rel, trials=3)
    stores.write_manifest(run_dir, manifest)
    moved = tmp_path / "moved"
    run_dir.rename(moved)
    back = stores.read_manifest(moved)
    assert back.storage_url(moved) == f"journal:{moved / 'study.journal'}"
    outside = f"sqlite:///{tmp_path / 'elsewhere.db'}"
    assert stores.relative_storage(outside, moved) == outside


def _cli(*args):
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen(
        [sys.executable, "-c", "from autotune.cli import main; main()", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def _concurrent_searches(url: str, tmp_path, trials: int = 12, study: str = "mi-tune"):
    """Two `mi-tune search` processes at once on one storage; their JSON summaries."""
    procs = [
        _cli(
            *SEARCH,
            "--trials",
            str(trials),
            "--storage",
            url,
            "--study",
            study,
            "--out",
            str(tmp_path / name),
            "--json",
        )
        for name in ("a", "b")
    ]
    outputs = [p.communicate(timeout=600) for p in procs]
    for p, (_out, err) in zip(procs, outputs, strict=True):
        assert p.returncode == 0, err
    return [json.loads(out) for out, _ in outputs]


def _check_shared(url: str, tmp_path, summaries, trials: int = 12, study: str = "mi-tune"):
    stored = optuna.load_study(study_name=study, storage=stores.open_storage(stores.normalize(url)))
    done = [t for t in stored.get_trials(deepcopy=False) if t.state.is_finished()]
    assert len(done) == 2 * trials  # exactly the sum: no trial mirrored, duplicated or counted twice
    assert len({t.number for t in done}) == len(done)
    runs = [t.user_attrs["run"] for t in done]
    assert sorted(runs.count(r) for r in set(runs)) == [trials, trials]
    assert all(s["new_trials"] == trials for s in summaries)
    last = max(summaries, key=lambda s: s["study_trials"])  # the one that finished second saw every trial
    assert last["study_trials"] == 2 * trials
    # different proposals: each process draws its own stream, and no plan of the study is spent again
    distinct = {json.dumps(t.params, sort_keys=True) for t in done}
    assert len(distinct) >= 0.8 * len(done)
    # the best is the study's best: the plan chosen from every trial of the study read back (0 new trials)
    best = load_best(os.path.join(last["run_dir"], "best.yaml"))
    run_id = stores.read_manifest(Path(last["run_dir"])).run_id
    again = run_study(_request(storage=stores.normalize(url), study_name=study, trials=trials, run_id=run_id, seed=0))
    assert again.new_trials == 0 and len(again.records) == 2 * trials
    assert again.best.number == best.provenance.trial
    # the best of the whole study on the scale it was chosen by (the screen's best plans simulated): the first of
    # the ranked top plans, with no candidate above it
    assert last["top_plans"][0]["plan"] == best.plan.describe() == last["best_plan"]
    assert all(row["total_tok_s"] <= best.prediction.total_tok_s for row in last["top_plans"])


@pytest.mark.parametrize("kind", ["sqlite", "journal"])
def test_two_processes_on_one_storage_share_the_study(kind, tmp_path):
    url = f"sqlite:///{tmp_path / 'shared.db'}" if kind == "sqlite" else str(tmp_path / "shared.journal")
    _check_shared(url, tmp_path, _concurrent_searches(url, tmp_path))


def postgres_url() -> str:
    url = os.environ.get(POSTGRES_ENV, "")
    if not url:
        pytest.fail(f"{POSTGRES_ENV} is not set: `make test` starts a PostgreSQL server on 127.0.0.1 and exports it")
    return url


def test_two_processes_on_postgresql_share_the_study(tmp_path):
    url = postgres_url()
    study = f"concurrent-{uuid.uuid4().hex[:8]}"
    _check_shared(url, tmp_path, _concurrent_searches(url, tmp_path, study=study), study=study)


def test_workers_on_postgresql_write_each_trial_once(tmp_path):
    url = stores.normalize(postgres_url())
    study = f"workers-{uuid.uuid4().hex[:8]}"
    result = run_study(_request(storage=url, study_name=study, trials=16, workers=2, run_id="w"))
    assert len(result.records) == 16 and result.new_trials == 16


def _request(**kw):
    defaults = dict(
        model=load_model("deepseek-v4.1-flash"),
        hardware=load_preset("rtx-pro-6000-x8"),
        workload=W,
        space=load_space(),
        num_gpus=8,
        trials=16,
        seed=5,
    )
    return SearchRequest(**{**defaults, **kw})


@pytest.mark.parametrize("kind", ["journal", "sqlite"])
def test_workers_are_processes_sharing_one_storage(kind, tmp_path):
    url = f"journal:{tmp_path / 'w.journal'}" if kind == "journal" else f"sqlite:///{tmp_path / 'w.db'}"
    result = run_study(_request(storage=url, trials=16, workers=2, run_id="r1"))
    assert result.new_trials == 16 and len(result.records) == 16
    stored = optuna.load_study(study_name="mi-tune", storage=stores.open_storage(url))
    tags = {t.user_attrs["worker"] for t in stored.trials}
    assert tags == {"r1/0", "r1/1"}  # two processes each wrote their own trials
    assert {t.user_attrs["run"] for t in stored.trials} == {"r1"}
    # the best is the study's best (both processes' trials) on the scale it was chosen by: simulated where the
    # search simulated (a screened figure can be above it: issue 17's one ranking scale)
    ranked = {r.number: r.value for r in result.records}
    assert set(ranked) == {t.number for t in stored.trials}
    assert ranked[result.best.number] == pytest.approx(max(ranked.values()))
    assert "2 worker processes" in result.strategy


def test_workers_without_a_storage_use_a_temporary_journal():
    result = run_study(_request(storage="", trials=10, workers=2))
    assert result.new_trials == 10 and len(result.records) == 10


def test_trials_keep_the_prediction_they_were_scored_with(tmp_path):
    url = f"journal:{tmp_path / 'p.journal'}"
    first = run_study(_request(storage=url, trials=12, run_id="p"))
    stored = optuna.load_study(study_name="mi-tune", storage=stores.open_storage(url))
    feasible = [t for t in stored.trials if t.value > 0]
    assert feasible and all(t.user_attrs["prediction"]["total_tok_s"] == pytest.approx(t.value) for t in feasible)
    # read back without predicting again: the records carry the stored figures
    again = run_study(_request(storage=url, trials=12, run_id="p"))
    assert again.new_trials == 0
    assert [r.prediction.total_tok_s for r in again.records] == pytest.approx(
        [r.prediction.total_tok_s for r in first.records]
    )


SECRET = "S3cret-Pw-18"


def test_no_password_is_written_or_printed_when_the_login_fails(tmp_path):
    out = tmp_path / "run"
    url = f"postgresql://mi:{SECRET}@127.0.0.1:1/mitune"  # port 1: the connection is refused
    proc = _cli(*SEARCH, "--trials", "4", "--storage", url, "--out", str(out), "--json")
    stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 2 and "mi-tune: error: --storage: cannot open" in stderr
    assert SECRET not in stdout + stderr
    written = [p for p in out.rglob("*") if p.is_file()]
    assert written  # the manifest was written before the storage was opened
    assert not [p for p in written if SECRET.encode() in p.read_bytes()]
    resume = yaml.safe_load((out / "manifest.yaml").read_text())["resume"]
    assert resume[resume.index("--storage") + 1] == "postgresql://mi@127.0.0.1:1/mitune"  # PGPASSWORD supplies it


@pytest.mark.parametrize("given", ["--storage", "--storage="])
def test_resume_commands_and_manifests_hold_no_password(given, tmp_path):
    from autotune.api import _resume_command

    url = f"postgresql://mi:{SECRET}@db.example:5432/mitune"
    argv = ("mi-tune", "search", given, url) if given == "--storage" else ("mi-tune", "search", given + url)
    assert SECRET not in " ".join(_resume_command(argv, tmp_path))
    assert stores.relative_storage(stores.normalize(url), tmp_path) == "postgresql+psycopg://mi@db.example:5432/mitune"
    assert SECRET not in stores.redact(url) and ":***@" in stores.redact(url)


PASSWORD_ROLE_ENV = "MI_TUNE_TEST_POSTGRES_PASSWORD_ROLE"
SMALL_SEARCH = ["search", "--model", "llama-3.1-70b", "--preset", "rtx-pro-6000-x8", "--isl", "64", "--osl", "8",
                "--concurrency", "4", "--num-requests", "16"]  # fmt: skip


@pytest.fixture
def password_database():
    """(URL with a password, the password): a database owned by the role `.ci/postgres.sh` makes log in with a
    password (scram-sha-256), the role given a fresh password here; the database is dropped afterwards."""
    import psycopg
    from psycopg import sql

    admin, role = postgres_url(), os.environ.get(PASSWORD_ROLE_ENV, "")
    if not role:
        pytest.fail(f"{PASSWORD_ROLE_ENV} is not set: `.ci/postgres.sh` names the role that logs in with a password")
    secret, db = f"Pw18-{uuid.uuid4().hex[:12]}", f"mitune_pw_{uuid.uuid4().hex[:8]}"
    parts = urlsplit(admin)
    with psycopg.connect(admin, autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone():
            conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
        conn.execute(sql.SQL("ALTER ROLE {} LOGIN PASSWORD {}").format(sql.Identifier(role), sql.Literal(secret)))
        conn.execute(sql.SQL("CREATE DATABASE {} OWNER {}").format(sql.Identifier(db), sql.Identifier(role)))
    try:
        yield f"postgresql://{role}:{secret}@{parts.hostname}:{parts.port}/{db}", secret
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(db)))


def test_a_password_login_succeeds_writes_no_password_and_resumes_from_pgpassword(password_database, tmp_path):
    """`--storage postgresql://user:PASS@.../db` logs in and the search completes; PASS is in no file under the run
    directory, not on stdout/stderr, not in --json. The resume command recorded holds no password: as written it
    is refused without PGPASSWORD and resumes the same study with it."""
    import psycopg

    url, secret = password_database
    wrong = url.replace(f":{secret}@", ":not-it@")
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        psycopg.connect(wrong).close()  # the server checks the password: the test proves something
    env = {k: v for k, v in os.environ.items() if k not in ("PGPASSWORD", "PGPASSFILE")}
    out = tmp_path / "run"
    proc = _cli(*SMALL_SEARCH, "--trials", "4", "--storage", url, "--out", str(out), "--json")
    stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 0, stderr
    assert secret not in stdout + stderr
    summary = json.loads(stdout)
    assert summary["study_trials"] == 4 and secret not in json.dumps(summary)
    written = [p for p in out.rglob("*") if p.is_file()]
    assert len(written) > 5 and not [p for p in written if secret.encode() in p.read_bytes()]
    resume = yaml.safe_load((out / "manifest.yaml").read_text())["resume"]
    assert resume[:2] == ["mi-tune", "search"] and resume[resume.index("--storage") + 1] == url.replace(
        f":{secret}", ""
    )
    again = [sys.executable, "-c", "from autotune.cli import main; main()", *resume[1:], "--json"]
    refused = subprocess.run(
        again, capture_output=True, text=True, timeout=300, env={**env, "PGPASSFILE": str(tmp_path / "none")}
    )
    assert refused.returncode == 2 and "no password supplied" in refused.stderr and "PGPASSWORD" in refused.stderr
    assert secret not in refused.stderr + refused.stdout
    resumed = subprocess.run(again, capture_output=True, text=True, timeout=300, env={**env, "PGPASSWORD": secret})
    assert resumed.returncode == 0, resumed.stderr
    assert secret not in resumed.stdout + resumed.stderr
    after = json.loads(resumed.stdout)
    assert after["study_trials"] == 4 and after["new_trials"] == 0  # the same study, its 4 trials read back
    assert (after["best_plan"], after["total_tok_s"]) == (summary["best_plan"], summary["total_tok_s"])
    assert not [p for p in out.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()]
