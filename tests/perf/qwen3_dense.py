"""Qwen3-8B (tests/fixtures/qwen3-dense, Qwen/Qwen3-8B's config.json), as published or with an AWQ checkpoint's
quantization_config: the dense GQA model the perf tests of 4-bit decode share."""

from __future__ import annotations

import json
from pathlib import Path

from autotune.catalog.models import model_from_config

FIXTURE = Path(__file__).parents[1] / "fixtures" / "qwen3-dense" / "qwen3-8b" / "config.json"
AWQ = {"quant_method": "awq", "bits": 4, "group_size": 128, "version": "gemm", "zero_point": True}


def qwen3_8b(tmp_path, quant: dict | None = None):
    """The model, its config written under `tmp_path` (with `quant` as its quantization_config)."""
    config = {k: v for k, v in json.loads(FIXTURE.read_text()).items() if not k.startswith("_")}
    if quant:
        config["quantization_config"] = quant
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    return model_from_config(path)
