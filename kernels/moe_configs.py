"""Fused-MoE Triton configs as vLLM and SGLang read them: the shape an engine looks up, its file name, the config
space and its shared-memory limits, and the files themselves. Pure: no torch, no triton, no GPU.

Engine sources read (write-ups, no code taken):
- vLLM 0.34.0 vllm/model_executor/layers/fused_moe/fused_moe.py:1178-1191 (`get_config_file_name`), 1194-1256
  (`get_moe_configs`: `$VLLM_TUNED_CONFIG_FOLDER/<name>` first, then the package's configs/; a "triton_version" key
  is dropped; the nearest batch key wins, 1511-1548); vllm/utils/platform_utils.py:73-78 (device name: runs of
  whitespace and "/" -> "_"); the H200 family is renamed NVIDIA_H200.
- SGLang 0.5.23 srt/layers/moe/moe_runner/triton_utils/fused_moe_triton_config.py:37-52 (`get_config_file_name`:
  spaces -> "_", block_shape printed as a Python list "[128, 128]", per_channel_quant, "_down"), 55-175
  (`get_moe_configs`: `$SGLANG_MOE_CONFIG_DIR/configs/triton_<X_Y_Z>/<name>`, then the newest other triton_*
  folder; a missing `_down` file falls back to the up file; every key must parse as int), 283-330 (the down
  config's BLOCK_SIZE_M is forced to the up config's: one token sort serves both GEMMs).
- E and N: both engines key on w2's shape (E, hidden, N): E = experts on this rank, N = the intermediate size of
  one expert on this rank (vLLM fused_moe.py:1511-1516; SGLang fused_moe_triton_config.py:283-286).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from autotune.capability.engine_profile import MoeConfigFiles, SharedFusionFacts
from autotune.capability.profiles import PROFILES, moe_config_engines
from autotune.specs.errors import MiTuneError

ENGINES = moe_config_engines()  # the engines whose profile says how they name and find tuned files
# mi-tune dtype name -> the `dtype=` selector both engines put in the name (None: bf16/fp16 weights, no selector).
# vllm fused_moe/config.py:50-80 `_get_config_dtype_str`; sglang fused_moe_triton_config.py:333-350.
DTYPE_SELECTORS = {
    "bf16": None,
    "fp16": None,
    "fp8_w8a8": "fp8_w8a8",
    "int8_w8a8": "int8_w8a8",
    "int8_w8a16": "int8_w8a16",
    "int4_w4a16": "int4_w4a16",
}
TUNABLE_DTYPES = ("bf16", "fp8_w8a8")  # the ones `tune-moe` can benchmark (weights and activations generated here)

# The batch grid of the files both engines ship (keys of vLLM's
# configs/E=128,N=384,device_name=NVIDIA_H200,dtype=fp8_w8a8,block_shape=[128,128].json).
DEFAULT_BATCH_SIZES = (1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 256, 512, 1024, 1536, 2048, 3072, 4096)

# The six launch parameters of the engines' fused_moe_kernel config and the values searched. The choices are the
# ones the engines' own tuning scripts sweep (benchmark_moe.py / tuning_fused_moe_triton.py in their repositories).
SPACE: dict[str, tuple[int, ...]] = {
    "BLOCK_SIZE_M": (16, 32, 64, 128, 256),
    "BLOCK_SIZE_N": (32, 64, 128, 256),
    "BLOCK_SIZE_K": (64, 128, 256),
    "GROUP_SIZE_M": (1, 16, 32, 64),
    "num_warps": (4, 8),
    "num_stages": (2, 3, 4, 5),
}
CONFIG_KEYS = tuple(SPACE)

# Largest shared memory one thread block may opt into, bytes, by compute capability: CUDA C++ Programming Guide,
# "Technical Specifications per Compute Capability" (docs.nvidia.com/cuda/cuda-c-programming-guide/
# #features-and-technical-specifications-technical-specifications-per-compute-capability): 8.0/8.7 163 KB,
# 8.6/8.9/12.x 99 KB, 9.0/10.x 227 KB. 1 KB = 1024 B.
SMEM_LIMIT_BYTES = {
    "sm_80": 163 * 1024,
    "sm_86": 99 * 1024,
    "sm_87": 163 * 1024,
    "sm_89": 99 * 1024,
    "sm_90": 227 * 1024,
    "sm_100": 227 * 1024,
    "sm_103": 227 * 1024,
    "sm_120": 99 * 1024,
    "sm_121": 99 * 1024,
}
# Bytes of one element of the GEMM operands as the kernel loads them (activations quantised with the weights).
OPERAND_BYTES = {"bf16": 2, "fp16": 2, "fp8_w8a8": 1, "int8_w8a8": 1}

# Which shared experts an engine fuses into the routed experts (E + n, top-k + n): its profile's fused_shared_experts
# rule (SGLang: autotune/capability/profiles/sglang_0_5_23.py, which the performance model reads too). The tuner
# benchmarks the Triton runner without an a2a backend or two-batch overlap; a W4A16 dtype is an int4 checkpoint's.


@dataclass(frozen=True)
class MoeShape:
    """What one engine looks a fused-MoE config up by, plus what a benchmark of it needs."""

    engine: str
    num_experts: int  # E: experts held by one rank (SGLang: shared experts fused in)
    shard_n: int  # N: one expert's intermediate size on one rank
    hidden: int  # K of the first GEMM
    topk: int  # experts per token (SGLang: + fused shared experts)
    dtype: str  # a DTYPE_SELECTORS key
    block_shape: tuple[int, int] | None = None  # block-FP8 weight scales [block_n, block_k]
    per_channel_quant: bool = False
    fused_shared_experts: int = 0

    @property
    def dtype_selector(self) -> str | None:
        return DTYPE_SELECTORS[self.dtype]


def files_rule(engine: str) -> MoeConfigFiles:
    """How `engine` names and finds its tuned files (its profile's `moe_configs`)."""
    rule = PROFILES[engine].moe_configs if engine in PROFILES else None
    if rule is None:
        raise MiTuneError(f"--engine: expected {', '.join(moe_config_engines())} or both, got {engine!r}")
    return rule


def device_file_name(device_name: str, engine: str) -> str:
    """The device part of a config name from torch.cuda.get_device_name()."""
    rule = files_rule(engine)
    name = re.sub(rule.device_name_separators, "_", device_name)
    return next((renamed for token, renamed in rule.device_renames if token in name.split("_")), name)


def config_file_name(shape: MoeShape, device_name: str, *, down: bool = False) -> str:
    """The file name `shape.engine` looks up on a GPU that torch calls `device_name`."""
    rule = files_rule(shape.engine)
    device = device_file_name(device_name, shape.engine)
    name = f"E={shape.num_experts},N={shape.shard_n},device_name={device}"
    if shape.dtype_selector:
        name += f",dtype={shape.dtype_selector}"
    if shape.block_shape and all(shape.block_shape):
        block = list(shape.block_shape)
        name += f",block_shape={block}" if rule.block_shape_spaces else f",block_shape={block}".replace(" ", "")
    if rule.per_channel_quant_suffix and shape.per_channel_quant:
        name += ",per_channel_quant=True"
    return name + ("_down" if down else "") + ".json"


def triton_folder(triton_version: str) -> str:
    """SGLang's per-Triton-version folder: 3.9.0 -> triton_3_9_0."""
    return "triton_" + triton_version.replace(".", "_")


def config_path(out_dir: str | Path, shape: MoeShape, device_name: str, triton_version: str, *, down=False) -> Path:
    """Where a tuned file goes under `out_dir`: vllm/<name> (VLLM_TUNED_CONFIG_FOLDER = out_dir/vllm) and
    sglang/configs/triton_X_Y_Z/<name> (SGLANG_MOE_CONFIG_DIR = out_dir/sglang)."""
    name = config_file_name(shape, device_name, down=down)
    folder = engine_config_dir(out_dir, shape.engine)
    if not files_rule(shape.engine).triton_version_folder:
        return folder / name
    return folder / "configs" / triton_folder(triton_version) / name


def engine_config_dir(out_dir: str | Path, engine: str) -> Path:
    """The directory the engine's environment variable points at (see config_path)."""
    return Path(out_dir) / engine


CONFIG_DIR_ENV = {engine: files_rule(engine).dir_env for engine in ENGINES}


# ---- shapes from the catalog model and the layout -------------------------------------------------------------


def moe_shape(
    model,
    *,
    engine: str,
    tp: int,
    ep: int = 1,
    dtype: str = "bf16",
    block_shape: tuple[int, int] | None = None,
    compute_capability: float = 9.0,
) -> MoeShape:
    """The fused-MoE shape `engine` runs for `model` (a ModelSpec) on tp GPUs with expert-parallel size ep.

    The MoE group is the tp ranks: ep == tp spreads whole experts (N unsplit), ep == 1 splits every expert's
    intermediate size over tp, and in between each group of ep ranks shards its experts over tp / ep.
    """
    files_rule(engine)  # an engine without tuned files is refused
    if dtype not in DTYPE_SELECTORS:
        raise MiTuneError(f"--dtype: expected one of {', '.join(DTYPE_SELECTORS)}, got {dtype!r}")
    if tp < 1 or ep < 1 or tp % ep:
        raise MiTuneError(f"--tp/--ep: expected positive sizes with tp a multiple of ep, got tp={tp} ep={ep}")
    moe_layers = [layer.ffn for layer in model.layers if layer.ffn.kind == "moe"]
    if not moe_layers:
        raise MiTuneError(f"--model {model.name}: not a MoE model, it has no fused-MoE kernel to tune")
    ffn = moe_layers[0]
    # a routed expert is gate + up + down projections: 3 x hidden x intermediate parameters
    intermediate = ffn.expert_params // (3 * model.hidden_size)
    if ffn.num_experts % ep:
        raise MiTuneError(f"--ep {ep}: {model.name} has {ffn.num_experts} experts, not divisible by {ep}")
    moe_tp = tp // ep
    if intermediate % moe_tp:
        raise MiTuneError(
            f"--tp {tp}: {model.name}'s expert intermediate size {intermediate} is not divisible by {moe_tp}"
        )
    shared = ffn.params // ffn.expert_params if ffn.expert_params else 0
    fused = 0
    fusion = PROFILES[engine].fused_shared_experts
    if fusion is not None:
        arch = f"sm_{round(compute_capability * 10)}"
        expert_format = "int4_awq" if dtype == "int4_w4a16" else model.expert_format
        fused = fusion(
            SharedFusionFacts(model.family, ffn.num_experts, shared, ep, arch, False, False, "triton", expert_format)
        )
    return MoeShape(
        engine=engine,
        num_experts=ffn.num_experts // ep + fused,
        shard_n=intermediate // moe_tp,
        hidden=model.hidden_size,
        topk=ffn.experts_per_token + fused,
        dtype=dtype,
        block_shape=tuple(block_shape) if block_shape else None,
        fused_shared_experts=fused,
    )


def default_block_shape(model, dtype: str) -> tuple[int, int] | None:
    """Block-FP8 checkpoints (expert_format fp8_block, DeepSeek-style 128x128 scales) keep their blocks under
    fp8_w8a8; anything else quantised online to FP8 is per-tensor (no block_shape in the name)."""
    if dtype == "fp8_w8a8" and model.expert_format == "fp8_block":
        return (128, 128)
    return None


# ---- the config space and its constraints ----------------------------------------------------------------------


def smem_bytes(config: Mapping[str, int], dtype: str) -> int:
    """Shared memory the software-pipelined kernel needs: num_stages buffers of an A tile (BLOCK_M x BLOCK_K) and
    a B tile (BLOCK_K x BLOCK_N). The estimate Triton's own matmul autotuner pruned by (triton 2.x
    python/triton/ops/matmul.py `early_config_prune`: (BLOCK_M + BLOCK_N) x BLOCK_K x num_stages x element size)."""
    elem = OPERAND_BYTES.get(dtype, 2)
    return (config["BLOCK_SIZE_M"] + config["BLOCK_SIZE_N"]) * config["BLOCK_SIZE_K"] * config["num_stages"] * elem


def smem_limit(arch: str) -> int:
    if arch not in SMEM_LIMIT_BYTES:
        raise MiTuneError(f"no shared-memory limit known for {arch!r} (known: {', '.join(SMEM_LIMIT_BYTES)})")
    return SMEM_LIMIT_BYTES[arch]


def violations(config: Mapping[str, int], shape: MoeShape, arch: str, batch: int) -> list[str]:
    """Why a config cannot (or need not) run for `shape` at `batch` tokens; empty when it is a candidate."""
    out = []
    need, limit = smem_bytes(config, shape.dtype), smem_limit(arch)
    if need > limit:
        out.append(f"shared memory {need} B > {limit} B ({arch})")
    if shape.block_shape:
        block_n, block_k = shape.block_shape
        # the kernel reads one weight scale per (block_n x block_k) block per tile: a tile must sit inside one
        # block along K and divide the block along N (vLLM fused_moe.py get_default_config comment at 1410-1420)
        if block_k % config["BLOCK_SIZE_K"]:
            out.append(f"BLOCK_SIZE_K {config['BLOCK_SIZE_K']} does not divide the scale block {block_k}")
        if block_n % config["BLOCK_SIZE_N"]:
            out.append(f"BLOCK_SIZE_N {config['BLOCK_SIZE_N']} does not divide the scale block {block_n}")
    # a tile taller than an expert's routed rows only adds padding: top-k picks distinct experts, so one expert gets
    # at most one row per token
    rows_cap = max(16, 1 << math.ceil(math.log2(max(1, batch))))
    if config["BLOCK_SIZE_M"] > rows_cap:
        out.append(f"BLOCK_SIZE_M {config['BLOCK_SIZE_M']} > {rows_cap}: an expert gets at most {batch} rows")
    if config["BLOCK_SIZE_N"] > 2 * shape.shard_n:  # the first GEMM's output is 2N wide (gate and up)
        out.append(f"BLOCK_SIZE_N {config['BLOCK_SIZE_N']} wider than the 2N = {2 * shape.shard_n} output")
    return out


def candidates(shape: MoeShape, arch: str, batch: int, space: Mapping | None = None) -> list[dict[str, int]]:
    """Every config of `space` (default SPACE) that passes `violations`, in a fixed order."""
    out = [{}]
    for key, values in (space or SPACE).items():
        out = [{**c, key: v} for c in out for v in values]
    return [c for c in out if not violations(c, shape, arch, batch)]


def space_summary(shape: MoeShape, arch: str, batches: Iterable[int]) -> list[dict]:
    """Rows for --dry-run: the choices and, per batch, how many configs survive the constraints."""
    total = math.prod(len(v) for v in SPACE.values())
    return [{"batch": b, "candidates": len(candidates(shape, arch, b)), "space": total} for b in batches]


# ---- the files -------------------------------------------------------------------------------------------------

SIDECAR_SCHEMA = "mi-tune/moe-tune/v1"
SIDECAR_SUFFIX = ".mi-tune.json"


def config_document(best: Mapping[int, Mapping[str, int]], engine: str, triton_version: str) -> dict:
    """The JSON an engine reads: {"<batch>": {BLOCK_SIZE_M, ..., num_stages}}; vLLM also gets "triton_version"
    (it drops that key, fused_moe.py:1245); SGLang parses every key as an int, so it gets only batches."""
    doc: dict = {str(m): {k: int(cfg[k]) for k in CONFIG_KEYS} for m, cfg in sorted(best.items())}
    if files_rule(engine).triton_version_key:
        doc["triton_version"] = triton_version
    return doc


def sidecar_path(config_file: Path) -> Path:
    """The benchmark record beside a config file: <name>.mi-tune.json (no engine reads it: neither name matches an
    engine's lookup)."""
    return config_file.with_name(config_file.name.removesuffix(".json") + SIDECAR_SUFFIX)


def write_json(path: Path, doc: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=4) + "\n")


def read_sidecar(path: str | Path) -> dict:
    """A sidecar written by tune-moe; a foreign or damaged file is a one-line MiTuneError naming it."""
    try:
        doc = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise MiTuneError(f"{path}: cannot read tuned MoE benchmark: {exc}") from None
    if not isinstance(doc, dict) or doc.get("schema") != SIDECAR_SCHEMA:
        raise MiTuneError(f"{path}: not a tune-moe benchmark (expected schema {SIDECAR_SCHEMA})")
    return doc


def nearest(configs: Mapping[int, object], batch: int):
    """The engines' pick: the entry whose batch key is nearest (ties: the smaller key, as min() over sorted keys)."""
    return configs[min(sorted(configs), key=lambda m: abs(m - batch))]
