"""Architecture adapters: a Hugging Face config.json (as a dict) -> ModelSpec, one function per family.

Parameter counts follow shared/reference/models.md: every projection is counted (q/kv/o with their LoRA ranks,
indexer, compressor, dense/shared/routed FFN, embedding + untied head); norms, routers, mHC and biases are not.
Adding a family = one adapter function + one entry in ADAPTERS.
"""

from __future__ import annotations

from collections.abc import Callable

from autotune.catalog.adapters.deepseek_v4 import deepseek_v4_model, deepseek_v41_model
from autotune.catalog.adapters.gqa import gqa_model
from autotune.catalog.adapters.hybrid import glm5_next_model, qwen35_moe_model
from autotune.catalog.adapters.mla import mla_model
from autotune.specs import ModelSpec

Adapter = Callable[[dict, str], ModelSpec]

ADAPTERS: dict[str, Adapter] = {
    "llama": gqa_model,
    "qwen3": gqa_model,  # dense Qwen3 (Qwen3ForCausalLM): qwen3_moe's layout without experts
    "qwen3_moe": gqa_model,
    "deepseek_v3": mla_model,
    "deepseek_v32": mla_model,
    "glm_moe_dsa": mla_model,
    "deepseek_v4": deepseek_v4_model,
    "deepseek_v41": deepseek_v41_model,
    "qwen3_5_moe": qwen35_moe_model,
    "qwen3_5_moe_text": qwen35_moe_model,  # text-only checkpoints (Qwen3_5MoeForCausalLM)
    "glm5_next": glm5_next_model,
}
