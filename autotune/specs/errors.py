"""Errors that reach the user as one line (exit 2), never as a traceback."""


class MiTuneError(Exception):
    """A user mistake or an impossible request: the CLI prints it on one line and exits 2."""


class SpecError(MiTuneError):
    """A data file or value does not follow its contract; the message names the file and field."""
