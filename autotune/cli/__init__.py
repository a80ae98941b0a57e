"""mi-tune command line: each command parses its flags, calls one library function and prints.

`app` is the Typer application (`autotune.cli.app`); the command modules register on it when imported, in the
order `mi-tune --help` lists them. Exit codes: 0 success, 2 bad input (one line on stderr), 1 internal failure.
"""

from autotune.cli import box, kernels, search, serve  # noqa: F401  (registers the commands, in --help's order)
from autotune.cli.app import app, main, run

__all__ = ["app", "main", "run"]
