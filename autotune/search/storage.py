"""Study storages and the run directory's own files.

Run directory layout (every path stored in it is RELATIVE to the run directory, so a moved or copied run
directory keeps working; `mi-tune report RUN_DIR` and a resumed search read only these files):

    RUN_DIR/
      manifest.yaml   written by `mi-tune search` before the first trial:
                        format: 1
                        run_id: <hex>            this run's id; its trials carry user attr "run" = run_id
                        study: <name>            study name inside the storage
                        storage: study.journal   relative path when the storage is a file inside RUN_DIR,
                                                 else the URL as given (sqlite:///abs, postgresql://..., journal:...)
                        trials: <N>              trials this run was asked for (its own, not the study's)
                        seed, model, preset/hardware, space: the search's inputs (to resume it)
                        resume: [mi-tune, search, ...]   the exact argv that resumes this run
                        elapsed_s: <float>       search time so far (summed over resumed sessions)
      study.journal   the default study storage (Optuna JournalFileBackend; safe for several processes)
      hardware.yaml   the box searched
      best.yaml, report.md, report.html, summary.json, trials.csv, plots/   outputs (report: autotune/report)

Each trial's user attrs: "plan" (plan dict or None), "reason" (why infeasible, or ''), "prediction" (the
Prediction dict as predicted when the trial ran: a report shows it without predicting again) and "run".

Storage URLs accepted by `--storage`: sqlite:///PATH, journal:PATH or a path ending in .log/.journal
(JournalFileBackend), postgresql://... (psycopg 3, `pip install 'psycopg[binary]'`). A relative file path
is relative to the current directory when given on the command line and to RUN_DIR in manifest.yaml.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

from autotune.specs import MiTuneError, rundir, to_dict
from autotune.specs.io import read_text

MANIFEST = rundir.MANIFEST
DEFAULT_STORAGE = rundir.STUDY_JOURNAL  # relative to the run directory
JOURNAL_SUFFIXES = (".log", ".journal")
SQLITE_BUSY_S = 60.0  # how long a SQLite writer waits for another process's lock
OPEN_ATTEMPTS = 5
SCHEMA_RACE = ("already exists", "UNIQUE constraint failed", "duplicate key")
MANIFEST_FORMAT = 1


def normalize(url: str, base: Path | None = None) -> str:
    """A --storage value as a canonical URL: 'sqlite:///ABS', 'journal:ABS' or a PostgreSQL/MySQL URL.
    A relative file path is resolved against `base` (default: the current directory). Bad input raises
    MiTuneError naming --storage and what was expected."""
    text = url.strip()
    if not text:
        raise MiTuneError("--storage: expected a storage URL or a journal file path, got an empty string")
    base = base or Path.cwd()
    if text.startswith("journal:"):
        path = text.removeprefix("journal:").removeprefix("//")
        if not path:
            raise MiTuneError(f"--storage: expected journal:PATH, got {redact(url)!r}")
        return "journal:" + str((base / path).resolve())
    if "://" not in text:
        if text.endswith(JOURNAL_SUFFIXES):
            return "journal:" + str((base / text).resolve())
        raise MiTuneError(
            f"--storage: expected sqlite:///PATH, journal:PATH, a path ending in .log/.journal or "
            f"postgresql://USER@HOST/DB, got {redact(url)!r}"
        )
    try:
        parts = urlsplit(text)
        parts.port  # noqa: B018 - raises ValueError on a malformed port
    except ValueError as exc:
        raise MiTuneError(f"--storage: cannot parse {redact(url)!r}: {exc}") from None
    scheme = parts.scheme.lower()
    if scheme == "sqlite":
        path = text[len("sqlite:///") :] if text.lower().startswith("sqlite:///") else ""
        if not path:
            raise MiTuneError(f"--storage: expected sqlite:///PATH, got {redact(url)!r}")
        return "sqlite:///" + str((base / path).resolve())
    if scheme.split("+")[0] in ("postgresql", "postgres"):
        if not parts.hostname and not parts.path.strip("/"):
            raise MiTuneError(f"--storage: expected postgresql://USER[:PASSWORD]@HOST[:PORT]/DB, got {redact(url)!r}")
        try:
            import psycopg  # noqa: F401
        except ImportError:
            raise MiTuneError(
                "--storage: PostgreSQL needs the psycopg driver (version 3): pip install 'psycopg[binary]'"
            ) from None
        return "postgresql+psycopg://" + text.split("://", 1)[1]
    if scheme.split("+")[0] == "mysql":
        return text
    raise MiTuneError(
        f"--storage: unknown scheme '{parts.scheme}' in {redact(url)!r}; expected sqlite:///PATH, journal:PATH, "
        "a .log/.journal path or postgresql://..."
    )


def _make_parent(path: Path, url: str) -> None:
    """Create the folder a file storage lives in; a path through a regular file is the user's mistake."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise MiTuneError(f"--storage: cannot create the folder of {redact(url)}: {exc.strerror}") from None


def _journal_backend(path: str):
    """Optuna's JournalFileBackend, whose appends inside `deferred_sync()` reach the file (and so the other
    processes that read it) at once but are synced to disk once, at the end: a batch of trials written by
    search/runner.py costs one fsync (~7 ms on this machine's disk) instead of one a trial (one log a trial,
    optuna storages/journal/_file.py append_logs)."""
    import json

    from optuna.storages.journal import JournalFileBackend
    from optuna.storages.journal._file import get_lock_file

    class Journal(JournalFileBackend):
        deferred = False
        unsynced = False

        def append_logs(self, logs: list[dict[str, Any]]) -> None:
            if not self.deferred:
                return super().append_logs(logs)
            line = "".join(json.dumps(log, separators=(",", ":")) + "\n" for log in logs)  # optuna's format
            with get_lock_file(self._lock), open(self._file_path, "ab") as f:
                f.write(line.encode("utf-8"))
                f.flush()
            self.unsynced = True

        @contextlib.contextmanager
        def deferred_sync(self):
            self.deferred = True
            try:
                yield
            finally:
                self.deferred = False
                if self.unsynced:
                    self.unsynced = False
                    fd = os.open(self._file_path, os.O_RDONLY)
                    try:
                        os.fsync(fd)
                    finally:
                        os.close(fd)

    return Journal(path)


def deferred_sync(study):
    """A context in which a journal storage's writes are synced to disk once (`_journal_backend`); a no-op
    for other storages."""
    backend = getattr(getattr(study, "_storage", None), "_backend", None)
    return backend.deferred_sync() if hasattr(backend, "deferred_sync") else contextlib.nullcontext()


def open_storage(url: str):
    """The Optuna storage behind a normalized URL (see `normalize`)."""
    import optuna
    from optuna.storages import JournalStorage

    if url.startswith("journal:"):
        path = Path(url.removeprefix("journal:"))
        _make_parent(path, url)
        return JournalStorage(_journal_backend(str(path)))
    engine_kwargs: dict[str, Any] = {}
    if url.startswith("sqlite:///"):
        _make_parent(Path(url.removeprefix("sqlite:///")), url)
        engine_kwargs["connect_args"] = {"timeout": SQLITE_BUSY_S}  # several processes write one file
    for attempt in range(OPEN_ATTEMPTS):
        try:
            with _schema_lock(url):
                return optuna.storages.RDBStorage(url, engine_kwargs=engine_kwargs)
        except Exception as exc:  # a server that refuses us, a database that does not exist
            # two processes creating one new database's tables race ("already exists", a duplicate
            # schema-version row): the loser tries again and finds the tables made
            if attempt + 1 < OPEN_ATTEMPTS and any(m in str(exc) for m in SCHEMA_RACE):
                time.sleep(0.2 * (attempt + 1))
                continue
            why = _first_line(exc)
            if password := _password(url):
                why = why.replace(password, "***")
            elif url.startswith("postgresql") and "password" in why:  # a resume command's URL: none written
                why += " (a URL without its password reads it from PGPASSWORD or ~/.pgpass)"
            raise MiTuneError(f"--storage: cannot open {redact(url)}: {type(exc).__name__}: {why}") from None
    raise AssertionError("unreachable")


@contextlib.contextmanager
def _schema_lock(url: str):
    """Processes on one machine open a SQLite file one at a time (Optuna creates its tables on first open)."""
    if not url.startswith("sqlite:///"):
        yield
        return
    import fcntl

    with open(url.removeprefix("sqlite:///") + ".lock", "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _password(url: str) -> str:
    try:
        return urlsplit(url).password or ""
    except ValueError:
        return ""


def redact(url: str) -> str:
    """A URL with its password shown as ***, for messages."""
    password = _password(url)
    return url.replace(f":{password}@", ":***@", 1) if password else url


def without_password(url: str) -> str:
    """A URL without its password, for files and resume commands: PostgreSQL's driver then reads it from the
    environment (PGPASSWORD) or ~/.pgpass, so no file mi-tune writes holds it."""
    password = _password(url)
    return url.replace(f":{password}@", "@", 1) if password else url


def _first_line(exc: Exception) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else ""


# ------------------------------------------------------------------ run directory
@dataclass(frozen=True)
class Manifest:
    run_id: str
    study: str
    storage: str  # relative to the run directory for a file inside it; else a URL
    trials: int
    resume: tuple[str, ...] = ()
    elapsed_s: float = 0.0
    inputs: dict[str, Any] | None = None

    def storage_url(self, run_dir: Path) -> str:
        """The storage as a URL, a relative file resolved against the run directory (wherever it now is)."""
        if "://" in self.storage or self.storage.startswith("journal:"):
            return self.storage
        path = (run_dir / self.storage).resolve()
        return f"journal:{path}" if self.storage.endswith(JOURNAL_SUFFIXES) else f"sqlite:///{path}"


def new_run_id() -> str:
    return secrets.token_hex(8)


def relative_storage(url: str, run_dir: Path) -> str:
    """How the manifest records a storage: relative to the run directory when the file lies inside it."""
    for prefix in ("journal:", "sqlite:///"):
        if url.startswith(prefix):
            path = Path(url.removeprefix(prefix))
            try:
                rel = path.resolve().relative_to(run_dir.resolve())
            except ValueError:
                return url
            if prefix == "sqlite:///" and rel.suffix in JOURNAL_SUFFIXES:
                return url  # a SQLite file named *.log would be read back as a journal
            return str(rel)
    return without_password(url)


def read_manifest(run_dir: Path) -> Manifest | None:
    path = run_dir / MANIFEST
    if not path.is_file():
        return None
    try:
        raw = yaml.safe_load(read_text(path)) or {}
    except yaml.YAMLError as exc:
        raise MiTuneError(f"{path}: not valid YAML: {_first_line(exc)}") from None
    if not isinstance(raw, dict) or not raw.get("run_id") or not raw.get("storage"):
        raise MiTuneError(f"{path}: expected a mapping with run_id and storage (a run directory's manifest)")
    return Manifest(
        run_id=str(raw["run_id"]),
        study=str(raw.get("study", "mi-tune")),
        storage=str(raw["storage"]),
        trials=int(raw.get("trials", 0)),
        resume=tuple(str(a) for a in raw.get("resume") or ()),
        elapsed_s=float(raw.get("elapsed_s", 0.0)),
        inputs=raw.get("inputs"),
    )


def write_manifest(run_dir: Path, manifest: Manifest) -> Path:
    path = run_dir / MANIFEST
    doc = {
        "format": MANIFEST_FORMAT,
        "run_id": manifest.run_id,
        "study": manifest.study,
        "storage": manifest.storage,
        "trials": manifest.trials,
        "elapsed_s": round(manifest.elapsed_s, 3),
        "resume": list(manifest.resume),
        "inputs": manifest.inputs or {},
    }
    tmp = path.with_suffix(".yaml.tmp")
    tmp.write_text(yaml.safe_dump(doc, sort_keys=False))
    os.replace(tmp, path)
    return path


def open_study(req, url: str | None = None):
    """The persistent study of a request (None when it has no storage), checked to be the same search."""
    import optuna

    url = url if url is not None else req.storage
    if not url:
        return None
    study = optuna.create_study(
        study_name=req.study_name, storage=open_storage(url), direction="maximize", load_if_exists=True
    )
    check_same_study(study, req)
    return study


def check_same_study(study, req) -> None:
    """A resumed or shared study must be the same search: same model, box, workload and space (any --seed: a
    process with another seed draws other proposals for the same question)."""
    key = f"{req.model.name}|{req.hardware.fingerprint}|{to_dict(req.workload)}|{req.space.source}"
    key += "|keep-precision" if req.keep_precision else ""
    stored = study.user_attrs.get("search_key")
    if stored is None:
        study.set_user_attr("search_key", key)
    elif stored != key:
        raise MiTuneError(
            f"--storage/--study: study '{req.study_name}' holds a different search; use a new --out or --study name"
        )
