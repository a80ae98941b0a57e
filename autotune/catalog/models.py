"""The model catalog: Hugging Face config.json copies shipped in autotune/catalog/models/, loaded by name or path.

Each shipped copy carries a top-level "_mi_tune" object with what HF configs lack: the catalog name, hf_id,
revision, the source of its values and, where an official figure exists, kv_bytes_per_token_native.
"""

from __future__ import annotations

import dataclasses
import functools
from importlib.resources import as_file, files
from pathlib import Path

from autotune.catalog.adapters import ADAPTERS
from autotune.specs import MiTuneError, ModelSpec, SpecError, read_document
from autotune.specs.ranges import check_name, check_tree

CATALOG = (
    "deepseek-v4.1-flash",
    "deepseek-v4-flash",
    "deepseek-v3",
    "glm-5",
    "qwen3-235b-a22b",
    "qwen3-235b-a22b-w8a8",
    "llama-3.1-70b",
    # hybrid linear-attention families (catalog/adapters/hybrid.py) and GLM-5.3
    "glm-5.3",
    "glm-5.3-flash",
    "qwen3.5-397b-a17b",
    "qwen3.5-397b-a17b-fp8",
    "qwen3.5-397b-a17b-awq",
    "qwen3.5-35b-a3b",
)
META_KEY = "_mi_tune"


def list_models() -> list[ModelSpec]:
    return [load_model(name) for name in CATALOG]


def load_model(name_or_path: str) -> ModelSpec:
    """A catalog model by name or HF id (case-insensitive), or any supported config.json (or its directory)."""
    key = name_or_path.strip().lower()
    key = _names_by_hf_id().get(key, key)
    if key in CATALOG:
        return _catalog_model(key)
    path = Path(name_or_path).expanduser()
    if path.is_dir():
        path = path / "config.json"
    if path.exists() or path.suffix == ".json" or "/" in name_or_path:
        spec = model_from_config(path)  # read_document names a missing file
        return dataclasses.replace(spec, checkpoint_dir=str(path.resolve().parent))
    known = ", ".join(CATALOG)
    raise MiTuneError(f"unknown model '{name_or_path}' (known: {known}; or a path to a config.json)")


def model_meta(name: str) -> dict:
    """The "_mi_tune" object of a catalog model: name, hf_id, revision, source."""
    key = name.strip().lower()
    if key not in CATALOG:
        raise MiTuneError(f"unknown model '{name}' (known: {', '.join(CATALOG)})")
    with as_file(files("autotune.catalog") / "models" / f"{key}.json") as path:
        return dict(read_document(path)[META_KEY])


def model_rows() -> list[dict]:
    """One row per catalog model for `mi-tune models`."""
    return [
        {
            "name": m.name,
            "family": m.family,
            "total_params_b": round(m.total_params / 1e9, 1),
            "active_params_b": round(m.active_params_decode / 1e9, 1),
            "kv_bytes_per_token": m.kv_bytes_per_token("auto"),
            "state_bytes_per_seq": m.state_bytes_per_seq(),  # linear-attention state of one request (hybrids)
            "hf_id": m.hf_id,
        }
        for m in list_models()
    ]


@functools.cache
def _names_by_hf_id() -> dict[str, str]:
    return {model_meta(name)["hf_id"].lower(): name for name in CATALOG}


@functools.cache
def _catalog_model(name: str) -> ModelSpec:
    with as_file(files("autotune.catalog") / "models" / f"{name}.json") as path:
        return model_from_config(path)


# msModelSlim (Huawei's quantisation tool) checkpoints carry quant_model_description.json beside config.json and no
# quantization_config; vllm-ascend detects them by that file (vllm_ascend/quantization/modelslim_config.py:67,
# 503-509). W8A8: INT8 weights and per-token dynamic INT8 activations on every linear layer (modelslim_config.py).
MODELSLIM_FILE = "quant_model_description.json"
W8A8_MODELSLIM = "w8a8_modelslim"


def modelslim_formats(path: Path, meta: dict) -> dict:
    """ModelSpec overrides of an msModelSlim W8A8 checkpoint (a local one by its description file, a catalog copy
    by `_mi_tune.modelslim: w8a8`); {} otherwise."""
    if meta.get("modelslim") != "w8a8" and not (path.parent / MODELSLIM_FILE).is_file():
        return {}
    return {
        "dense_dtype": "int8",
        "expert_dtype": "int8",
        "dense_format": W8A8_MODELSLIM,
        "expert_format": W8A8_MODELSLIM,
    }


def model_from_config(path: Path) -> ModelSpec:
    """Build a ModelSpec from one config.json through the adapter of its model_type; errors name the file."""
    config = read_document(path)
    model_type = config.get("model_type")
    if model_type is None:
        raise SpecError(f"{path}: missing field 'model_type'")
    adapter = ADAPTERS.get(model_type)
    if adapter is None:
        supported = ", ".join(sorted(ADAPTERS))
        raise SpecError(f"{path}: model_type '{model_type}' is not supported (supported: {supported})")
    meta = config.get(META_KEY) or {}
    if not isinstance(meta, dict):
        raise SpecError(f"{path}: {META_KEY}: expected a mapping, got {meta!r}")
    name = meta.get("name") or path.resolve().parent.name
    try:
        check_name(name, f"{META_KEY}.name" if meta.get("name") else "the model directory's name")
        spec = adapter(config, name)
        spec = dataclasses.replace(
            spec,
            hf_id=str(meta.get("hf_id", spec.hf_id)),
            kv_bytes_per_token_native=float(meta.get("kv_bytes_per_token_native", spec.kv_bytes_per_token_native)),
            **modelslim_formats(path, meta),
        )
        check_tree(spec, "")  # what the adapter built: finite and in range (specs/ranges.py), layer by layer
        return spec
    except (SpecError, ValueError, TypeError) as exc:
        raise SpecError(f"{path}: {exc}") from None
