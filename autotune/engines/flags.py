"""Flag tables pinned per engine version (flags/*.yaml, dumped from the engines' real parsers) and argv checks."""

from __future__ import annotations

import difflib
import functools
import json
import re
from dataclasses import dataclass
from pathlib import Path

from autotune.capability.profiles import PROFILES
from autotune.specs.errors import MiTuneError
from autotune.specs.io import safe_load_yaml

FLAGS_DIR = Path(__file__).parent / "flags"
# the routers' pinned versions; the engines' are their profiles' (capability/profiles/)
ROUTER_VERSIONS = {"sglang-router": "0.3.2", "vllm-router": "0.1.17"}
ENGINE_VERSIONS = {**{e: p.version for e, p in PROFILES.items()}, **ROUTER_VERSIONS}
_NEGATIVE_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")
_SHOWN_CHOICES = 12


@dataclass(frozen=True)
class Flag:
    name: str  # canonical option string
    takes_value: bool
    nargs: str | int | None = None  # argparse nargs when not exactly one value
    choices: tuple[str, ...] = ()  # empty = any value


@dataclass(frozen=True)
class FlagTable:
    engine: str
    version: str
    command: tuple[str, ...]  # the prefix before the arguments, e.g. ("vllm", "serve")
    max_positionals: int
    options: dict[str, Flag]  # every accepted option string, aliases included
    json_fields: dict[str, dict[str, frozenset[str]]]  # JSON-valued flag -> object path ("top", "pass_config") -> keys

    @property
    def label(self) -> str:
        return f"{self.engine} {self.version}"


def load_table(engine: str, version: str) -> FlagTable:
    if (engine, version) not in _available():
        pinned = ", ".join(f"{e} {v}" for e, v in sorted(_available()))
        raise MiTuneError(f"no flag table for {engine} {version} (pinned: {pinned})")
    return _load(engine, version)


@functools.cache
def _available() -> frozenset[tuple[str, str]]:
    return frozenset(tuple(p.stem.rsplit("-", 1)) for p in FLAGS_DIR.glob("*.yaml"))


@functools.cache
def _load(engine: str, version: str) -> FlagTable:
    doc = safe_load_yaml((FLAGS_DIR / f"{engine}-{version}.yaml").read_text())  # libyaml: 6x faster
    options = {}
    for name, entry in doc["flags"].items():
        flag = Flag(name, entry["value"], entry.get("nargs"), tuple(entry.get("choices", ())))
        for option in (name, *entry.get("aliases", ())):
            options[option] = flag
    positionals = doc.get("positionals", [])
    json_fields = {
        flag: {path: frozenset(keys) for path, keys in paths.items()}
        for flag, paths in doc.get("json_fields", {}).items()
    }
    return FlagTable(engine, version, tuple(doc["command"]), len(positionals), options, json_fields)


def validate_argv(engine: str, version: str, argv: list[str] | tuple[str, ...]) -> None:
    """Raise MiTuneError unless `engine` `version` accepts every option and value of argv (command prefix optional)."""
    table = load_table(engine, version)
    args = _strip_command(table, list(argv))
    positionals = 0
    i = 0
    while i < len(args):
        token = args[i]
        if not _is_option(token):
            positionals += 1
            if positionals > table.max_positionals:
                raise MiTuneError(f"{table.label} takes {table.max_positionals} positional argument(s); got {token!r}")
            i += 1
            continue
        name, inline = token.split("=", 1) if token.startswith("--") and "=" in token else (token, None)
        flag = table.options.get(name) or _unknown(table, name)
        values, i = _take_values(table, flag, name, inline, args, i + 1)
        for value in values:
            _check_value(table, flag, name, value)


def _strip_command(table: FlagTable, argv: list[str]) -> list[str]:
    """Drop the table's command prefix: `vllm serve` or `<any python> -m module`."""
    if table.command[1] == "-m":
        for i in range(len(argv) - 1):
            if argv[i] == "-m" and argv[i + 1] == table.command[2]:
                return argv[i + 2 :]
        return argv
    n = len(table.command)
    if len(argv) >= n and Path(argv[0]).name == table.command[0] and argv[1:n] == list(table.command[1:]):
        return argv[n:]
    return argv


def _is_option(token: str) -> bool:
    return token.startswith("-") and token != "-" and not _NEGATIVE_NUMBER.match(token)


def _unknown(table: FlagTable, name: str) -> Flag:
    close = difflib.get_close_matches(name, table.options, n=1)
    hint = f" (did you mean {close[0]}?)" if close else ""
    raise MiTuneError(f"{table.label} does not accept flag {name}{hint}")


def _take_values(table: FlagTable, flag: Flag, name: str, inline: str | None, args: list[str], i: int):
    """The values that follow option `name` at args[i:], and the index after them (argparse's nargs rules)."""
    if not flag.takes_value:
        if inline is not None:
            raise MiTuneError(f"{table.label}: flag {name} takes no value, got {inline!r}")
        return [], i
    if inline is not None:
        return [inline], i
    end = i
    while end < len(args) and not _is_option(args[end]):
        end += 1
    wanted = {None: (1, 1), "?": (0, 1), "+": (1, None), "*": (0, None)}.get(flag.nargs, (flag.nargs, flag.nargs))
    low, high = wanted
    count = end - i if high is None else min(end - i, high)
    if count < low:
        raise MiTuneError(f"{table.label}: flag {name} expects {low} value(s), got {count}")
    return args[i : i + count], i + count


def _check_value(table: FlagTable, flag: Flag, name: str, value: str) -> None:
    if flag.choices and value not in flag.choices:
        shown = ", ".join(flag.choices[:_SHOWN_CHOICES])
        more = f" and {len(flag.choices) - _SHOWN_CHOICES} more" if len(flag.choices) > _SHOWN_CHOICES else ""
        raise MiTuneError(f"{table.label}: {name} {value!r} is not one of {shown}{more}")
    if flag.name in table.json_fields:
        _check_json(table, name, value, table.json_fields[flag.name])


def _check_json(table: FlagTable, name: str, value: str, fields: dict[str, frozenset[str]]) -> None:
    try:
        doc = json.loads(value)
    except json.JSONDecodeError as exc:
        raise MiTuneError(f"{table.label}: {name} needs a JSON object, got {value!r} ({exc.msg})") from None
    if not isinstance(doc, dict):
        raise MiTuneError(f"{table.label}: {name} needs a JSON object, got {value!r}")
    for path, keys in fields.items():
        obj = doc if path == "top" else doc.get(path, {})
        for key in obj if isinstance(obj, dict) else ():
            if key not in keys:
                where = key if path == "top" else f"{path}.{key}"
                raise MiTuneError(f"{table.label}: {name} has no key {where!r}")
