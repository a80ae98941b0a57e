"""The Typer application and how a run ends: exit 0 success, 2 bad input (one line on stderr), 1 internal failure,
130 interrupted. The commands live in the sibling modules and register on `app` (see `autotune/cli/__init__.py`)."""

from __future__ import annotations

import atexit
import errno
import gc
import os
import sys
import threading

import typer

from autotune.specs import MiTuneError

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="Find the fastest vLLM/SGLang serving plan for this box, and launch it.",
)
kernels_app = typer.Typer(no_args_is_help=True, help="Fused-MoE Triton configs for vLLM/SGLang: tune-moe, check.")
app.add_typer(kernels_app, name="kernels")

ARGV: list[str] = []  # this invocation's arguments: `search` records how to resume a run


def run(argv: list[str] | None = None) -> int:
    """Run the CLI; returns the exit code (0 ok, 2 bad input, 1 internal failure)."""
    ARGV[:] = sys.argv[1:] if argv is None else list(argv)
    try:
        # parser errors come back as exceptions; Ctrl-C inside a command comes back as 130 (the command says what
        # it kept, e.g. search's best-so-far)
        code = app(args=argv, prog_name="mi-tune", standalone_mode=False)
        return code if isinstance(code, int) else 0
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except typer.Abort:
        print("mi-tune: interrupted", file=sys.stderr)
        return 130
    except MiTuneError as exc:
        print(f"mi-tune: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("mi-tune: interrupted", file=sys.stderr)
        return 130
    except OSError as exc:
        if exc.errno in WRITE_ERRNOS and exc.filename and not os.environ.get("MI_TUNE_DEBUG"):
            # a path the user chose that cannot be written (a file where a folder goes, /sys, a full disk)
            print(f"mi-tune: error: {exc.filename}: cannot write ({exc.strerror})", file=sys.stderr)
            return 2
        return _internal(exc)
    except Exception as exc:  # internal failure: one line, traceback on request
        if _is_click(exc, "NoArgsIsHelpError"):  # `mi-tune` or `mi-tune kernels` alone: the help
            exc.show()
            return exc.exit_code
        if _is_click(exc, "ClickException"):  # a usage error (unknown flag, a value of the wrong type): one line
            print(f"mi-tune: error: {_usage_message(exc)}", file=sys.stderr)
            return 2
        return _internal(exc)
    return 0


# errno values of a write the user's environment refuses (not a bug of mi-tune): cli.run says which path
WRITE_ERRNOS = {errno.EACCES, errno.EPERM, errno.EEXIST, errno.ENOTDIR, errno.EISDIR, errno.EROFS, errno.ENOSPC}
WRITE_ERRNOS |= {errno.EDQUOT, errno.ENAMETOOLONG}


def _internal(exc: Exception) -> int:
    if os.environ.get("MI_TUNE_DEBUG"):
        raise exc
    message = f"mi-tune: internal error: {type(exc).__name__}: {exc} (set MI_TUNE_DEBUG=1 for a traceback)"
    print(message, file=sys.stderr)
    return 1


def _is_click(exc: Exception, name: str) -> bool:
    """Whether `exc` is click's exception class `name` (Typer vendors click in newer releases, so the class is
    matched by name rather than imported)."""
    return any(cls.__name__ == name for cls in type(exc).__mro__)


def _usage_message(exc) -> str:
    text = " ".join(exc.format_message().split())
    ctx = getattr(exc, "ctx", None)
    return f"{text} (see '{ctx.command_path} --help')" if ctx is not None else text


# Young-generation collection threshold of a CLI process (Python's default: 700 container allocations). A search
# allocates millions of short-lived containers; at the default the collector's passes over the imported libraries'
# and the study's long-lived objects took 2.0 s of the DeepSeek-V3 question's 12.6 s CPU time, at 50,000 they take
# 0.6 s of 9.7 s, peak memory 240 -> 245 MB (gc.callbacks, one run each, 2 shared cores). The older generations
# keep their defaults: cyclic garbage is still collected, in bounded batches.
YOUNG_GC_THRESHOLD = 50_000


def main() -> None:
    """The console script: run the command, then end the process (see `_exit`)."""
    gc.set_threshold(YOUNG_GC_THRESHOLD, *gc.get_threshold()[1:])
    _exit(run())


def _exit(code: int) -> None:
    """End the process as a normal exit does (exit handlers run: logging, multiprocessing children; the streams
    are flushed) but without the interpreter's teardown, which frees every module and object one by one: 0.7 s
    after a search. A normal exit while another (non-daemon) thread still runs, under a profiler or tracer
    (`python -m cProfile -o FILE -m autotune.cli ...` writes FILE after main returns), or when a stream cannot
    be flushed (a closed pipe: the normal exit reports it)."""
    main_thread = threading.main_thread()
    others = any(t is not main_thread and not t.daemon and t.is_alive() for t in threading.enumerate())
    if others or sys.getprofile() is not None or sys.gettrace() is not None:
        sys.exit(code)
    atexit._run_exitfuncs()  # runs and clears them (CPython's atexit_callfuncs), as Py_FinalizeEx would
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        sys.exit(code)
    os._exit(code)
