"""The ranges every number from outside must fall in: one table, shared by every reader.

A value read from a hardware profile (also the one a best.yaml embeds), a plan, a workload file, a search space,
a model's config.json or a command-line flag is checked here: it must be finite and inside its field's range,
else a SpecError names the file and field (or the flag), the range with its unit, and the value.

Ranges are generous but physical: wide enough for any box or model in sight (usually 10x or more the largest
public figure, cited), narrow enough that a typo, a NaN or a sign error is caught before it reaches the model.

Extending: a new contract field, file kind or config.json key registers its range here (or calls `register`
from its own module): `FIELDS[contract class name][field] = Range(...)` for fields read through specs.io
(from_dict checks them as it converts), `CONFIG_KEYS[key] = Range(...)` for config.json keys adapters read with
`Fields.num`/`nums`. tests/test_bad_input.py walks the contracts of every file kind and fails on a numeric
field without a range.
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass
from typing import Any

from autotune.specs.errors import SpecError
from autotune.specs.workload import MAX_EXPERT_LOAD_CV


@dataclass(frozen=True)
class Range:
    """low..high in `unit`; `open_low`/`open_high` exclude the bound; `note` explains a special value."""

    low: float
    high: float
    unit: str = ""
    note: str = ""
    open_low: bool = False
    open_high: bool = False

    def holds(self, value: float) -> bool:
        if not math.isfinite(value):
            return False
        above = value > self.low if self.open_low else value >= self.low
        below = value < self.high if self.open_high else value <= self.high
        return above and below

    def describe(self) -> str:
        if self.open_low or self.open_high:
            text = f"{_fmt(self.low)} {'<' if self.open_low else '<='} x {'<' if self.open_high else '<='} "
            text += _fmt(self.high)
        else:
            text = f"{_fmt(self.low)}..{_fmt(self.high)}"
        text += f" {self.unit}" if self.unit else ""
        return text + (f" ({self.note})" if self.note else "")

    def check(self, value: Any, where: str) -> None:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return  # types are the converter's business; this checks numbers only
        if not self.holds(value):
            finite = "a finite number in " if isinstance(value, float) and not math.isfinite(value) else ""
            raise SpecError(f"{where}: expected {finite}{self.describe()}, got {_fmt(value)}")


def _fmt(value: float) -> str:
    if isinstance(value, int) or (math.isfinite(value) and value == int(value) and abs(value) < 1e15):
        return f"{int(value):,}" if abs(value) >= 10_000 else str(int(value))
    return f"{value:g}"


def count(high: float, unit: str = "", note: str = "", low: float = 0) -> Range:
    """low..high, both included; low 0 by default (a count or a size: never negative)."""
    return Range(low, high, unit, note)


# Shared bounds (GB/s, TFLOPS, GiB). Each is ~10x the largest public figure so new parts fit without an edit.
GBS = 100_000.0  # memory bandwidth: B300 8 TB/s, MI355X 8 TB/s (vendor datasheets)
LINK_GBS = 20_000.0  # one link/bus per direction: NVLink 5 900 GB/s per GPU, PCIe 6 x16 121 GB/s
TFLOPS = 200_000.0  # dense peak: B300 FP4 15 PFLOPS dense (NVIDIA Blackwell Ultra datasheet)
GPU_GIB = 4_096.0  # one accelerator's memory: B300 / MI355X 288 GB
MAX_GPUS = 4_096  # GPUs of one box a plan spans (NVL72 = 72; generous for future racks)
MAX_TOKENS = 2**27  # tokens: longest public context 10M (Llama 4 Scout config.json max_position_embeddings)
UNKNOWN = "0 = unknown"

# contract class name -> field -> range; specs.io.from_dict checks each number of those fields as it reads.
FIELDS: dict[str, dict[str, Range]] = {
    # hardware profile (`mi-tune probe --out`, presets, best.yaml hardware.profile)
    "HostInfo": {
        "sockets": count(64, note=UNKNOWN),  # largest x86 servers: 32 sockets (HPE Superdome Flex)
        "cores": count(1_000_000, note=UNKNOWN),
        "numa_nodes": count(1024, note=UNKNOWN),  # Linux MAX_NUMNODES at CONFIG_NODES_SHIFT=10
        "memory_gib": count(1_048_576, "GiB", UNKNOWN),  # 1 PiB; Superdome Flex tops at 48 TB
        "inter_socket_gbs": count(LINK_GBS, "GB/s", UNKNOWN),
    },
    "Accelerator": {
        "index": count(MAX_GPUS - 1),
        "memory_gib": count(GPU_GIB, "GiB", UNKNOWN),
        "mem_bw_gbs": count(GBS, "GB/s", UNKNOWN),
        "peak_tflops": count(TFLOPS, "TFLOPS", UNKNOWN),
        "numa_node": count(1023, note="-1 = unknown", low=-1),
        "pcie_gen": count(6, note="0 = unknown; Gen 1-6, the lane rates PCIE_LANE_GBS knows"),
        "pcie_width": count(32, "lanes", UNKNOWN),  # PCIe links are x1..x32 (PCIe base specification)
        "nvlink_gbs": count(LINK_GBS, "GB/s", "0 = no NVLink"),
    },
    "CollectivePoint": {
        "message_bytes": count(2**40, "bytes"),
        "busbw_gbs": count(LINK_GBS, "GB/s"),
        "latency_us": count(1e9, "us"),
    },
    "OpPoint": {
        "time_us": count(1e9, "us"),
        "tflops": count(TFLOPS, "TFLOPS"),
        "gbs": count(10 * GBS, "GB/s"),  # bytes the op must move / time: caches can beat HBM
    },
    "Measured": {
        "gemm_tflops": count(TFLOPS, "TFLOPS"),
        "mem_bw_gbs": count(GBS, "GB/s", UNKNOWN),
        "p2p_gbs": count(LINK_GBS, "GB/s"),
        "host_copy_gbs": count(LINK_GBS, "GB/s"),
    },
    "HardwareProfile": {
        "pcie_switch_uplink_gbs": count(LINK_GBS, "GB/s", "0 = same as one GPU link"),
        # multipliers on an op class's predicted time fitted by `mi-tune measure`; a factor of 100 either way
        # means the model, not the box, is wrong
        "corrections": Range(0.01, 100.0, "x predicted time"),
    },
    # plan (plan files, best.yaml, search-space choices)
    "PhasePlan": {
        "gpus": count(MAX_GPUS - 1, note="GPU indices"),
        **{name: count(MAX_GPUS, low=1) for name in ("replicas", "tp", "ep", "pp", "dp", "dcp")},
    },
    "Batching": {
        "max_running": count(1_048_576, "requests", low=1),
        "chunked_prefill_tokens": count(MAX_TOKENS, "tokens", low=1),
        "cuda_graph_max_bs": count(1_048_576, "requests", "null = the engine's default", low=1),
    },
    # draft tokens per step: MTP/EAGLE deployments use 1-8 (engine-knobs.md); 64 is far past any useful depth
    "Speculative": {"draft_tokens": count(64, "tokens", "0 with method none")},
    # workload files (`--workload`), best.yaml's workload
    "Workload": {
        "isl": count(MAX_TOKENS, "tokens", low=1),
        "osl": count(MAX_TOKENS, "tokens", low=1),
        "concurrency": count(1_048_576, "requests", "0 = as many as fit"),
        "rate_rps": count(1e6, "requests/s", "0 = closed loop"),
        "num_requests": count(10_000_000, "requests", low=1),
        "burst": count(10_000_000, "requests", "0 = no burst"),
        "ttft_ms": count(86_400_000, "ms", "0 = no SLO"),  # a day
        "tpot_ms": count(3_600_000, "ms", "0 = no SLO"),  # an hour
        "ttft_percentile": Range(0, 100, note="0 = not given", open_high=True),
        "isl_std": count(MAX_TOKENS, "tokens"),
        "osl_std": count(MAX_TOKENS, "tokens"),
        "prefix_hit_rate": Range(0, 1, note="a share of the prompt", open_high=True),
        "slo_percentile": Range(0, 100, note="a percentile", open_low=True, open_high=True),
        "draft_acceptance": Range(0, 1, note="a per-draft-token acceptance (0 = the model's default)", open_high=True),
        "expert_load_cv": Range(0, MAX_EXPERT_LOAD_CV, note="an expert-popularity CV (0 = the model's default)"),
    },
    # ModelSpec as the catalog adapters build it (checked by `check_tree` after every adapter)
    "ModelSpec": {
        "hidden_size": count(1_048_576, low=1),
        "vocab_size": count(2**24, "tokens", low=1),
        "max_position": count(MAX_TOKENS, "tokens", low=1),
        "embed_params": count(1e13, "parameters"),
        "kv_bytes_per_token_native": count(1e9, "bytes", "0 = derive"),
        "window_kv_elems_per_seq": count(1e12, "elements"),
        "host_table_bytes": count(1e15, "bytes"),
    },
    "LayerSpec": {"index": count(100_000)},
    "AttentionSpec": {
        "num_heads": count(65_536, low=1),
        "num_kv_heads": count(65_536, low=1),
        "params": count(1e12, "parameters"),
        "score_dim": count(1_048_576, low=1),
        "kv_elems_per_token": count(1e8, "elements"),
        "kv_read_elems_per_token": count(1e8, "elements"),
        "compress_ratio": count(MAX_TOKENS, low=1),
        "attended_cap": count(MAX_TOKENS, note="0 = dense"),
        "window": count(MAX_TOKENS, "tokens", "0 = none"),
        "score_dim_decode": count(1_048_576),
        "index_heads": count(65_536),
        "index_dim": count(1_048_576),
        "index_scored_cap": count(MAX_TOKENS, note="0 = all"),
        "replicated_params": count(1e12, "parameters"),
        "index_pool": count(MAX_TOKENS, "tokens", low=1),  # one pooled indexer key per index_pool tokens
        "state_elems_per_seq": count(1e12, "elements", "0 = no recurrent state"),  # linear-attention state
        "conv_elems_per_seq": count(1e12, "elements", "0 = no short convolution"),
    },
    "FfnSpec": {
        "params": count(1e13, "parameters"),
        "num_experts": count(65_536),
        "experts_per_token": count(65_536),
        "expert_params": count(1e12, "parameters"),
    },
}

# config.json keys the adapters read with Fields.num / Fields.nums (HF names). A key not listed here is a count
# or a size: CONFIG_DEFAULT. Largest public values for scale: hidden 16,384 and 128 heads (Llama 3.1 405B),
# 384 routed experts (Kimi K2), 512 (Qwen3-Next), vocab 262,144 (Gemma 3), 126 layers (Llama 3.1 405B).
CONFIG_KEYS: dict[str, Range] = {
    "hidden_size": count(1_048_576, low=1),
    "vocab_size": count(2**24, "tokens", low=1),
    "max_position_embeddings": count(MAX_TOKENS, "tokens", low=1),
    "num_hidden_layers": count(100_000, low=1),
    "num_attention_heads": count(65_536, low=1),
    "num_key_value_heads": count(65_536, low=1),
    "head_dim": count(65_536, low=1),
    "intermediate_size": count(2**24, low=1),
    "moe_intermediate_size": count(2**24, low=1),
    "n_routed_experts": count(65_536, note="0 = dense"),
    "num_experts": count(65_536, note="0 = dense"),
    "num_experts_per_tok": count(65_536, low=1),
    "n_shared_experts": count(65_536),
    "moe_layer_freq": count(100_000, low=1),
    "decoder_sparse_step": count(100_000, low=1),
    "kv_lora_rank": count(1_048_576, low=1),
    "qk_nope_head_dim": count(65_536),
    "qk_rope_head_dim": count(65_536),
    "v_head_dim": count(65_536, low=1),
    "o_groups": count(65_536, low=1),
}
CONFIG_DEFAULT = count(2**40, note="a count or a size")


# Names from files that become part of a path (a run directory results/<model>-<hardware>-<time>, a tuned-MoE
# config file named after the GPU): contract class name -> fields. `check_name` refuses what could leave the
# directory (a '/' or '\\', '.' or '..', control characters); `path_component` sanitises what is written anyway.
NAME_FIELDS: dict[str, tuple[str, ...]] = {"HardwareProfile": ("name",), "Accelerator": ("name",)}
NAME_MAX_CHARS = 128
_UNSAFE = re.compile(r"[/\\\x00-\x1f\x7f]")


def check_name(value: Any, where: str) -> None:
    """A name that may become one path component: a non-empty string of at most NAME_MAX_CHARS characters, no
    path separator or control character, not '.' or '..'."""
    if not isinstance(value, str):
        raise SpecError(f"{where}: expected a name (a string), got {value!r}")
    if not value.strip() or value in (".", "..") or len(value) > NAME_MAX_CHARS or _UNSAFE.search(value):
        raise SpecError(
            f"{where}: expected a name of 1..{NAME_MAX_CHARS} characters without '/', a backslash or control "
            f"characters (it becomes part of a file name), got {value!r}"
        )


def path_component(name: str, fallback: str = "unnamed") -> str:
    """`name` as one safe path component: runs of characters other than letters, digits, '.', '_', '+', '-' become
    '-', leading dots and dashes go (no '..', no hidden file), at most NAME_MAX_CHARS characters."""
    safe = re.sub(r"[^A-Za-z0-9._+-]+", "-", name).lstrip(".-")[:NAME_MAX_CHARS].rstrip("-")
    return safe or fallback


def register(owner: str, **ranges: Range) -> None:
    """Add or replace the ranges of contract `owner`'s fields (a new contract or a new field of one)."""
    FIELDS.setdefault(owner, {}).update(ranges)


def field_range(owner: type | str, name: str) -> Range | None:
    return FIELDS.get(owner if isinstance(owner, str) else owner.__name__, {}).get(name)


def check_field(owner: type | str, name: str, value: Any, where: str) -> None:
    """Every number in `value` (a number, or lists/mappings of numbers) inside field `name`'s range."""
    owner_name = owner if isinstance(owner, str) else owner.__name__
    if name in NAME_FIELDS.get(owner_name, ()):
        check_name(value, where)
    rng = field_range(owner, name)
    if rng is not None:
        _walk(rng, value, where)


def check_config(key: str, value: Any, where: str) -> None:
    _walk(CONFIG_KEYS.get(key, CONFIG_DEFAULT), value, where)


def _walk(rng: Range, value: Any, where: str) -> None:
    if isinstance(value, dict):
        for k, v in value.items():
            _walk(rng, v, f"{where}.{k}")
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            _walk(rng, v, f"{where}[{i}]")
    elif not dataclasses.is_dataclass(value):
        rng.check(value, where)


def check_tree(obj: Any, where: str) -> None:
    """Check a contract built in code (a ModelSpec from an adapter) field by field, nested contracts included;
    errors name the path, e.g. 'layers[3].ffn.num_experts'."""
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        path = f"{where}.{f.name}" if where else f.name
        check_field(type(obj), f.name, value, path)
        items = value if isinstance(value, (list, tuple)) else (value,)
        for i, item in enumerate(items):
            if dataclasses.is_dataclass(item) and not isinstance(item, type):
                check_tree(item, f"{path}[{i}]" if item is not value else path)


def numeric_fields(cls: type, prefix: str = "", seen: frozenset = frozenset()) -> list[tuple[str, str, str]]:
    """(owner class name, field, dotted path) of every field of `cls` and its nested contracts that holds numbers
    (int, float, or containers of them): what a reader must range-check."""
    import typing

    out = []
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        if not f.init or f.name == "schema":
            continue
        tp = hints[f.name]
        leaves = _leaf_types(tp)
        path = f"{prefix}{f.name}"
        if leaves & {int, float}:
            out.append((cls.__name__, f.name, path))
        for leaf in leaves:
            if dataclasses.is_dataclass(leaf) and leaf not in seen:
                out += numeric_fields(leaf, f"{path}.", seen | {cls})
    return out


def _leaf_types(tp: Any) -> set:
    args = getattr(tp, "__args__", None)
    if not args:
        return {tp}
    return set().union(*(_leaf_types(a) for a in args))


__all__ = [
    "CONFIG_DEFAULT",
    "CONFIG_KEYS",
    "FIELDS",
    "Range",
    "check_config",
    "check_field",
    "check_name",
    "check_tree",
    "path_component",
    "field_range",
    "numeric_fields",
    "register",
]
