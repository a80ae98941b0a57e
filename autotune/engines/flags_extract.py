"""Write a pinned flag table (flags/<engine>-<version>.yaml) from an engine's REAL argument parser.

Run it as a file, not as a module, with a throwaway interpreter that can import the unpacked wheel:

    pip download --no-deps -d /tmp/wheels vllm==0.34.0
    unzip -q /tmp/wheels/vllm-0.34.0-*.whl 'vllm/*' -d /tmp/wheels/src/vllm
    VLLM_TARGET_DEVICE=cpu PYTHONPATH=/tmp/wheels/src/vllm python autotune/engines/flags_extract.py vllm \\
        --wheel /tmp/wheels/vllm-0.34.0-*.whl --stub llguidance xgrammar uvicorn \\
        --out autotune/engines/flags/vllm-0.34.0.yaml

Packages the parser never calls into may be replaced by import stubs (`--stub`); each stub is recorded in the
table. Only this file's own code and the parser's output are kept: no engine code is copied into mi-tune.
"""

from __future__ import annotations

import abc
import argparse
import enum
import hashlib
import importlib.abc
import importlib.machinery
import os
import platform
import shlex
import sys
import types
from datetime import date
from pathlib import Path

import yaml

SCHEMA = "mi-tune/engine-flags/v1"
RECORDED_ENV = ("PYTHONPATH", "VLLM_TARGET_DEVICE", "SGLANG_USE_CPU_ENGINE")
PLATFORM_PROBES = {"npu", "xpu", "mlu", "musa", "hpu", "mps"}  # hasattr(torch, x) must say no on a stub


class _AnyMeta(abc.ABCMeta):
    """A stub class: any attribute, call, index or arithmetic gives another stub; used as a decorator it is a no-op."""

    def __getattr__(cls, name):
        if name.startswith("__") and name.endswith("__") or "_stub" not in cls.__dict__:
            raise AttributeError(name)
        return _stub_class(f"{cls.__name__}.{name}")

    def __call__(cls, *args, **kwargs):
        if "_stub" not in cls.__dict__:
            return super().__call__(*args, **kwargs)
        if len(args) == 1 and not kwargs and callable(args[0]) and not isinstance(args[0], _AnyMeta):
            return args[0]
        return _stub_class(f"{cls.__name__}()")

    def __getitem__(cls, item):
        return _stub_class(f"{cls.__name__}[]")

    def __setitem__(cls, key, value):
        pass

    def __iter__(cls):
        return iter(())

    def __bool__(cls):
        return False

    def __len__(cls):
        return 0

    def __index__(cls):
        return 0

    def __eq__(cls, other):
        return cls is other

    def __hash__(cls):
        return id(cls)


def _same(cls, *other):
    return cls


for _op in ("or", "ror", "neg", "add", "radd", "sub", "rsub", "mul", "rmul", "truediv", "lt", "le", "gt", "ge"):
    setattr(_AnyMeta, f"__{_op}__", _same)


def _stub_class(name: str) -> type:
    return _AnyMeta(name, (), {"_stub": True})


class _StubModule(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__") or name in PLATFORM_PROBES:
            raise AttributeError(name)
        value = _stub_class(f"{self.__name__}.{name}")
        setattr(self, name, value)
        return value


class _StubFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def __init__(self, roots: set[str]):
        self.roots = roots

    def find_spec(self, fullname, path, target=None):
        if fullname.split(".")[0] in self.roots:
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):
        module = _StubModule(spec.name)
        module.__path__ = []
        return module

    def exec_module(self, module):
        pass


def _plain(value):
    if isinstance(value, enum.Enum):
        return value.name
    return value if isinstance(value, (str, int, float, bool)) or value is None else str(value)


def parser_to_flags(parser: argparse.ArgumentParser) -> tuple[dict, list]:
    """Every option string the parser accepts (hidden aliases too), grouped by the action it triggers."""
    by_action: dict[int, tuple[argparse.Action, list[str]]] = {}
    for option, action in parser._option_string_actions.items():
        by_action.setdefault(id(action), (action, []))[1].append(option)
    flags = {}
    for action, options in by_action.values():
        if isinstance(action, (argparse._HelpAction, argparse._VersionAction)):
            continue
        visible = [o for o in action.option_strings if o in options] or options
        name = next((o for o in visible if o.startswith("--")), visible[0])
        entry: dict = {}
        if aliases := sorted(o for o in options if o != name):
            entry["aliases"] = aliases
        entry["value"] = action.nargs != 0
        if action.nargs not in (None, 0):
            entry["nargs"] = _plain(action.nargs)
        if action.choices is not None and action.nargs != 0:
            entry["choices"] = sorted({str(_plain(c)) for c in action.choices if c is not None})
        if "Deprecated" in type(action).__name__ or action in getattr(parser, "_deprecated", ()):
            entry["deprecated"] = True
        flags[name] = entry
    positionals = [{"dest": a.dest, "nargs": _plain(a.nargs)} for a in parser._actions if not a.option_strings]
    return flags, positionals


def _vllm_parser() -> tuple[argparse.ArgumentParser, dict]:
    import dataclasses

    from vllm import platforms

    # VLLM_TARGET_DEVICE=cpu picks CpuPlatform; only --mm-processor-device reads device_type, report it as on a GPU box
    type(platforms.current_platform).device_type = "cuda"
    import typing

    from vllm.config import CompilationConfig, KVTransferConfig, PassConfig
    from vllm.config import cache as cache_config
    from vllm.entrypoints.cli.serve import ServeSubcommand
    from vllm.model_executor.layers.quantization import QUANTIZATION_METHODS
    from vllm.utils.argparse_utils import FlexibleArgumentParser
    from vllm.v1.attention.backends.registry import AttentionBackendEnum

    top = FlexibleArgumentParser(description="vLLM CLI")  # as vllm.entrypoints.cli.main.main builds it
    serve = ServeSubcommand().subparser_init(top.add_subparsers(required=False, dest="subparser"))

    def names(cls):
        return sorted(f.name for f in dataclasses.fields(cls))

    extra = {
        "json_fields": {
            "--compilation-config": {"top": names(CompilationConfig), "pass_config": names(PassConfig)},
            "--kv-transfer-config": {"top": names(KVTransferConfig)},
        },
        # plain str for argparse; the config dataclasses reject any other value right after parsing
        "config_choices": {
            "--attention-backend": ["auto", *(m.name for m in AttentionBackendEnum)],
            # KV_CACHE_DTYPES in 0.34; vLLM 0.23 has only the Literal CacheDType (vllm/config/cache.py:19)
            "--kv-cache-dtype": list(
                getattr(cache_config, "KV_CACHE_DTYPES", None) or typing.get_args(cache_config.CacheDType)
            ),
            "--quantization": list(QUANTIZATION_METHODS),
        },
    }
    return serve, extra


def _sglang_parser() -> tuple[argparse.ArgumentParser, dict]:
    import torch

    torch.cuda.is_available = lambda: True  # resolve SGLang's CUDA platform, as on a GPU box
    torch.cuda.get_device_name = lambda *args: "NVIDIA H100"
    torch.version.hip = None
    from sglang.srt.server_args import ServerArgs

    parser = argparse.ArgumentParser(prog="sglang serve")  # as sglang.srt.server_args.prepare_server_args
    ServerArgs.add_cli_args(parser)
    return parser, {}


def _sglang_diffusion_parser() -> tuple[argparse.ArgumentParser, dict]:
    import torch

    torch.cuda.is_available = lambda: True  # as _sglang_parser: resolve the CUDA platform
    torch.cuda.get_device_name = lambda *args: "NVIDIA H100"
    torch.version.hip = None
    from sglang.multimodal_gen.runtime.entrypoints.cli.serve import add_multimodal_gen_serve_args

    parser = argparse.ArgumentParser(prog="sglang serve")  # as sglang/cli/serve.py _run_diffusion builds it
    add_multimodal_gen_serve_args(parser)
    return parser, {}


def _router_parser() -> tuple[argparse.ArgumentParser, dict]:
    from sglang_router.router_args import RouterArgs

    parser = argparse.ArgumentParser()  # as sglang_router.launch_router.parse_router_args
    RouterArgs.add_cli_args(parser, use_router_prefix=False)
    return parser, {}


def _vllm_router_parser() -> tuple[argparse.ArgumentParser, dict]:
    from vllm_router.router_args import RouterArgs

    parser = argparse.ArgumentParser()  # as vllm_router.launch_router.parse_router_args
    RouterArgs.add_cli_args(parser, use_router_prefix=False)
    return parser, {}


# engine -> (command prefix validate_argv strips, how the parser is built, builder)
ENGINES = {
    "vllm": (["vllm", "serve"], "vllm.entrypoints.cli.serve.ServeSubcommand().subparser_init()", _vllm_parser),
    "sglang": (
        ["python3", "-m", "sglang.launch_server"],
        "sglang.srt.server_args.ServerArgs.add_cli_args(argparse.ArgumentParser(prog='sglang serve'))",
        _sglang_parser,
    ),
    "sglang-diffusion": (
        ["sglang", "serve"],
        "sglang.multimodal_gen.runtime.entrypoints.cli.serve.add_multimodal_gen_serve_args(argparse.ArgumentParser())",
        _sglang_diffusion_parser,
    ),
    "sglang-router": (
        ["python3", "-m", "sglang_router.launch_router"],
        "sglang_router.router_args.RouterArgs.add_cli_args(parser, use_router_prefix=False)",
        _router_parser,
    ),
    "vllm-router": (
        ["python3", "-m", "vllm_router.launch_router"],
        "vllm_router.router_args.RouterArgs.add_cli_args(parser, use_router_prefix=False)",
        _vllm_router_parser,
    ),
}


def main(argv: list[str] | None = None) -> None:
    cli = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    cli.add_argument("engine", choices=sorted(ENGINES))
    cli.add_argument("--wheel", required=True, type=Path, help="the downloaded wheel (name and sha256 are recorded)")
    cli.add_argument("--stub", nargs="*", default=[], help="top-level packages to replace by import stubs")
    cli.add_argument("--note", action="append", default=[], help="a remark to record in the table")
    cli.add_argument("--out", required=True, type=Path)
    args = cli.parse_args(argv)
    command, built_by, build = ENGINES[args.engine]
    here = Path(__file__).resolve().parent  # run as a file, this folder is on sys.path: its vllm.py/sglang.py would
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != here]  # shadow the engines' own packages
    sys.meta_path.insert(0, _StubFinder(set(args.stub)))
    parser, extra = build()
    flags, positionals = parser_to_flags(parser)
    for flag, values in extra.pop("config_choices", {}).items():
        flags[flag].update(choices=sorted(values), choices_checked_by="config validation right after argparse")
    version = args.wheel.name.split("-")[1]
    doc = {
        "schema": SCHEMA,
        "engine": args.engine,
        "version": version,
        "wheel": args.wheel.name,
        "wheel_sha256": hashlib.sha256(args.wheel.read_bytes()).hexdigest(),
        "extracted": {
            "on": date.today().isoformat(),
            "python": platform.python_version(),
            "parser": built_by,
            "env": {k: os.environ[k] for k in RECORDED_ENV if k in os.environ},
            "command": shlex.join(["python", "autotune/engines/flags_extract.py", *(argv or sys.argv[1:])]),
            "stubbed_imports": sorted(args.stub),
            "notes": args.note,
        },
        "command": command,
        "positionals": positionals,
        **extra,
        "flags": dict(sorted(flags.items())),
    }
    args.out.write_text(yaml.safe_dump(doc, sort_keys=False, width=120, default_flow_style=None))
    print(
        f"{args.out}: {len(flags)} flags, {sum(1 + len(f.get('aliases', ())) for f in flags.values())} option strings"
    )


if __name__ == "__main__":
    main()
