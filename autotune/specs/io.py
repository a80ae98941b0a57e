"""Generic (de)serialisation of the frozen-dataclass contracts to plain dicts and YAML/JSON.

`to_dict` and `from_dict` are exact inverses for every contract, so load -> dump is identical.
Fields declared with ``field(init=False)`` are derived: they are written but not read back.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import stat
import types
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

import yaml

from autotune.specs.errors import SpecError
from autotune.specs.ranges import check_field

# PyYAML's safe loader on libyaml's C parser where PyYAML has it (the same constructors and resolver: the same
# documents; 6x faster over the repository's 85 YAML files, and a search reads best.yaml, the box and the engine's
# flag table); the pure-Python one otherwise. Writing keeps the pure-Python emitter: libyaml breaks long flow
# lists at other places, and best.yaml's text stays as it was.
SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def safe_load_yaml(text: str) -> Any:
    """`yaml.safe_load`, on libyaml's parser when installed."""
    return yaml.load(text, Loader=SAFE_LOADER)


def to_dict(obj: Any) -> Any:
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        hints = _hints(type(obj))
        out = {f.name: _plain(hints[f.name], getattr(obj, f.name)) for f in dataclasses.fields(obj)}
        return {"schema": out.pop("schema"), **out} if "schema" in out else out
    return _plain(Any, obj)


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return get_type_hints(cls)


def _plain(tp: Any, value: Any) -> Any:
    """A plain YAML value; numbers declared float are written as floats so that load -> dump is identical."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return to_dict(value)
    if isinstance(value, (list, tuple)):
        args = get_args(tp)
        return [_plain(args[0] if args else Any, v) for v in value]
    if isinstance(value, dict):
        args = get_args(tp)
        return {k: _plain(args[1] if len(args) == 2 else Any, v) for k, v in value.items()}
    if isinstance(value, int) and not isinstance(value, bool) and float in (tp, *get_args(tp)):
        return float(value)
    return value


def from_dict(cls: type, data: Any, where: str) -> Any:
    """Build dataclass `cls` from `data`; errors name `where` (file and field path)."""
    return _convert(cls, data, where)


def from_dict_memo(cls: type, data: Any, where: str, memo: dict) -> Any:
    """`from_dict`, with the dataclasses nested in `cls` (kernels, batching, ...) built once per distinct input in
    `memo` (the caller's, e.g. one search's): a search builds phases whose sub-contracts recur. The result equals
    from_dict's; its nested contracts may be objects (frozen) shared with earlier results. Inputs are told apart
    by value, type (True is not 1, 1 is not 1.0) and key order; an unhashable one, and every error, take from_dict."""
    if not isinstance(data, dict) or not dataclasses.is_dataclass(cls) or getattr(cls, "FIELD_ALIASES", None):
        return from_dict(cls, data, where)
    hints, built = _hints(cls), {}
    try:
        for name, sub in data.items():
            sub_cls = hints.get(name)
            if isinstance(sub, dict) and dataclasses.is_dataclass(sub_cls):
                key = _frozen(sub)
                if key is None:
                    continue
                hit = memo.get((sub_cls, key))
                if hit is None:
                    hit = memo[(sub_cls, key)] = from_dict_memo(sub_cls, sub, where, memo)
                built[name] = hit
        return _convert_dataclass(cls, {**data, **built}, where, prebuilt=frozenset(built))
    except SpecError:  # from_dict's message, with the field path it names
        return from_dict(cls, data, where)


def _frozen(value: Any) -> tuple | None:
    """A hashable key telling `value` apart from every value from_dict could read differently; None when
    some part is not a plain YAML value."""
    if isinstance(value, dict):
        items = tuple((k, _frozen(v)) for k, v in value.items())
        return None if any(type(k) is not str or v is None for k, v in items) else (dict, items)
    if isinstance(value, (list, tuple)):
        items = tuple(map(_frozen, value))
        return None if None in items else (type(value), items)
    if value is None or isinstance(value, (bool, int, str)):
        return (type(value), value)
    if isinstance(value, float):
        return (float, repr(value))  # -0.0 is not 0.0; nan is itself
    return None


def convert(tp: Any, value: Any, where: str) -> Any:
    """Check one value against a contract type (int, str, a dataclass, ...) as the file readers do."""
    return _convert(tp, value, where)


def _type_name(tp: Any) -> str:
    if get_origin(tp) is Literal:
        return " | ".join(repr(a) for a in get_args(tp))
    return getattr(tp, "__name__", str(tp)).replace("typing.", "")


def _convert(tp: Any, value: Any, where: str) -> Any:
    origin = get_origin(tp)
    if tp is Any:
        return value
    if origin in (Union, types.UnionType):
        args = get_args(tp)
        if value is None and type(None) in args:
            return None
        errors = []
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _convert(arg, value, where)
            except SpecError as exc:
                errors.append(str(exc))
        raise SpecError(errors[0] if len(errors) == 1 else f"{where}: expected {_type_name(tp)}, got {value!r}")
    if origin is Literal:
        if value not in get_args(tp):
            choices = ", ".join(str(a) for a in get_args(tp))
            raise SpecError(f"{where}: expected one of {choices}, got {value!r}")
        return value
    if dataclasses.is_dataclass(tp):
        return _convert_dataclass(tp, value, where)
    if origin is tuple:
        if not isinstance(value, (list, tuple)):
            raise SpecError(f"{where}: expected a list, got {value!r}")
        args = get_args(tp)
        return tuple(_convert(args[0], v, f"{where}[{i}]") for i, v in enumerate(value))
    if origin is dict:
        if not isinstance(value, dict):
            raise SpecError(f"{where}: expected a mapping, got {value!r}")
        key_tp, val_tp = get_args(tp)
        return {_convert(key_tp, k, f"{where}"): _convert(val_tp, v, f"{where}.{k}") for k, v in value.items()}
    if tp is bool:
        if not isinstance(value, bool):
            raise SpecError(f"{where}: expected true or false, got {value!r}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise SpecError(f"{where}: expected an integer, got {value!r}")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise SpecError(f"{where}: expected a number, got {value!r}")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise SpecError(f"{where}: expected a string, got {value!r}")
        return value
    raise TypeError(f"unsupported contract type {tp!r} at {where}")


def _with_renamed_keys(cls: type, value: dict, where: str) -> dict:
    """`value` with the old keys a contract still reads (its FIELD_ALIASES: old key -> field) under their new name."""
    aliases = getattr(cls, "FIELD_ALIASES", {})
    if not any(old in value for old in aliases):
        return value
    out = dict(value)
    for old, new in aliases.items():
        if old in out:
            if new in out:
                raise SpecError(f"{where}: both '{old}' and '{new}' given (the same field, renamed: keep '{new}')")
            out[new] = out.pop(old)
    return out


def _convert_dataclass(cls: type, value: Any, where: str, prebuilt: frozenset = frozenset()) -> Any:
    if not isinstance(value, dict):
        raise SpecError(f"{where}: expected a mapping for {cls.__name__}, got {value!r}")
    hints = _hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    value = _with_renamed_keys(cls, value, where)
    unknown = sorted(set(value) - set(fields))
    if unknown:
        raise SpecError(f"{where}: unknown field '{unknown[0]}' (expected: {', '.join(fields)})")
    kwargs = {}
    for name, f in fields.items():
        if not f.init:
            continue
        path = f"{where}.{name}" if ": " in where else f"{where}: {name}"
        if name not in value:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise SpecError(f"{path}: missing required field")
            continue
        kwargs[name] = value[name] if name in prebuilt else _convert(hints[name], value[name], path)
        check_field(cls, name, kwargs[name], path)  # finite and inside its range (specs/ranges.py)
    try:
        return cls(**kwargs)
    except (ValueError, TypeError) as exc:  # a contract's own check; "tp: expected ..." names the field it is about
        name, sep, rest = str(exc).partition(": ")
        if sep and name in fields:
            raise SpecError(f"{where}.{name}: {rest}" if ": " in where else f"{where}: {name}: {rest}") from None
        raise SpecError(f"{where}: {exc}") from None


MAX_DOCUMENT_BYTES = 64 * 2**20  # a hardware profile with every probe curve is ~1 MB; best.yaml ~100 kB


def read_text(path: str | Path, limit: int = MAX_DOCUMENT_BYTES, what: str = "") -> str:
    """A text file's contents, read with a size bound: errors name the file (prefixed by `what`, e.g. a flag)
    for a missing file, a directory, a device or socket (`/dev/zero` would read forever), a file above `limit`
    bytes, or bytes that are not UTF-8."""
    p = Path(path)
    name = f"{what} {p}" if what else str(p)
    try:
        info = p.stat()
        if stat.S_ISDIR(info.st_mode):
            raise SpecError(f"{name}: cannot read (Is a directory)")
        if not (stat.S_ISREG(info.st_mode) or stat.S_ISFIFO(info.st_mode)):  # a pipe is read with the same bound
            raise SpecError(f"{name}: expected a regular file, not a device or socket")
        too_big = info.st_size > limit  # refused without reading it
        if not too_big:
            with p.open("rb") as handle:
                data = handle.read(limit + 1)
    except FileNotFoundError:
        raise SpecError(f"{name}: file not found") from None
    except OSError as exc:
        raise SpecError(f"{name}: cannot read ({exc.strerror})") from None
    if too_big or len(data) > limit:
        size = f"{limit / 2**20:g} MiB" if limit >= 2**20 else f"{limit:,} bytes"
        raise SpecError(f"{name}: larger than {size}; expected a mi-tune input file")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise SpecError(f"{name}: not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})") from None


def read_document(path: str | Path) -> dict:
    """Parse a YAML or JSON file into a mapping; errors name the file."""
    p = Path(path)
    text = read_text(p)
    try:
        data = json.loads(text) if p.suffix == ".json" else safe_load_yaml(text)
    except (yaml.YAMLError, json.JSONDecodeError, RecursionError) as exc:  # RecursionError: nesting 1000s deep
        line = getattr(getattr(exc, "problem_mark", None), "line", None)
        at = f" at line {line + 1}" if line is not None else ""
        raise SpecError(f"{p}: malformed {'JSON' if p.suffix == '.json' else 'YAML'}{at}") from None
    if not isinstance(data, dict):
        raise SpecError(f"{p}: expected a mapping at the top level")
    return data


def check_schema(data: dict, kind: str, where: str) -> None:
    want = f"mi-tune/{kind}/v1"
    got = data.get("schema")
    if got != want:
        raise SpecError(f"{where}: schema: expected '{want}', got {got!r}")


def load(cls: type, path: str | Path, kind: str) -> Any:
    data = read_document(path)
    check_schema(data, kind, str(path))
    return from_dict(cls, data, str(path))


def dump_yaml(obj: Any) -> str:
    return yaml.safe_dump(to_dict(obj), sort_keys=False, default_flow_style=None, width=120)


def dump_json(obj: Any) -> str:
    return json.dumps(to_dict(obj), indent=2)


def save(obj: Any, path: str | Path) -> Path:
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(dump_json(obj) + "\n" if p.suffix == ".json" else dump_yaml(obj))
    return p


__all__ = [
    "to_dict",
    "from_dict",
    "convert",
    "read_document",
    "safe_load_yaml",
    "read_text",
    "check_schema",
    "load",
    "dump_yaml",
    "dump_json",
    "save",
]
