"""SGLang Diffusion 0.5.23 capability rules (capability/rules.py machinery) and the attention backends it can run.

Paths are relative to sglang/multimodal_gen/ of the sglang-0.5.23 wheel; re-check against the unpacked wheel
(/tmp/wheels/src/sglang/sglang/multimodal_gen) before changing a rule. Facts (see `plan_facts`):
cc (compute capability), family, heads, tp, ulysses, ring, cfg, attention, cache_dit, uses_cfg (the request
runs classifier-free guidance), heads_split_ok (heads % (tp * ulysses) == 0).
"""

from __future__ import annotations

from dataclasses import dataclass

from autotune.capability.facts import compute_capability
from autotune.capability.profiles import profile
from autotune.capability.rules import Rule, RuleTable, Violation, violations_of
from autotune.specs import HardwareProfile

ENGINE = "sglang-diffusion"
VERSION = profile("sglang").version  # SGLang Diffusion ships in the sglang wheel: its pinned version
RING_CAPABLE = ["fa", "sage_attn"]  # runtime/server_args/server_args.py:109 RING_CAPABLE_ATTENTION_BACKENDS


@dataclass(frozen=True)
class AttentionBackend:
    name: str  # --attention-backend value
    kind: str  # dense | quantised | sparse
    exact: bool  # keeps the model's output (dense bf16 softmax attention)
    speed_vs_dense: float  # attention time of the dense bf16 kernel / this kernel's, at equal density (prior)
    density: float  # share of the attention score blocks computed (1.0 dense)
    config: str = ""  # --attention-backend-config value
    source: str = ""


# Speed priors (no measurement on these boxes): SageAttention2 (arXiv 2411.10958, INT4/INT8 QK + FP8 PV) reports
# ~3x FlashAttention2 on RTX 4090-class GPUs and about FA3-FP8 speed on Hopper -> 2.0 (sm_89/sm_120) / 1.3 (sm_90),
# kept below the paper's peak. fp8_fa_sm120 (FP8 mma.sync on SM120, runtime/platforms/cuda.py:533-560): FP8 tensor
# rate is 2x bf16 on SM120 -> 1.6, a prior. Sparse kernels run dense blocks at ~0.85 of the dense kernel's rate
# (block gather / index overhead), a prior; their density is their configured top-k.
def attention_backends(cc: float) -> tuple[AttentionBackend, ...]:
    sage_speed = 1.3 if 9.0 <= cc < 10.0 else 2.0
    return (
        # FA resolves to Torch SDPA on SM12x (runtime/platforms/cuda.py:520-529): searched as fa, costed as SDPA
        AttentionBackend("fa", "dense", True, 1.0, 1.0, source="runtime/platforms/cuda.py:516-529"),
        AttentionBackend("torch_sdpa", "dense", True, 0.85, 1.0, source="runtime/platforms/cuda.py:108-110"),
        AttentionBackend("sage_attn", "quantised", False, sage_speed, 1.0, source="runtime/platforms/cuda.py:153-195"),
        AttentionBackend("fp8_fa_sm120", "quantised", False, 1.6, 1.0, source="runtime/platforms/cuda.py:532-560"),
        # VSA: top-k = ceil((1 - sparsity) x kv blocks) (runtime/layers/attention/backends/video_sparse_attn.py:
        # 173-176); sparsity from --attention-backend-config (runtime/pipelines_core/stages/denoising.py:2334)
        *(
            AttentionBackend(
                "video_sparse_attn", "sparse", False, 0.85, round(1 - s, 3), f"sparsity={s}",
                "runtime/layers/attention/backends/video_sparse_attn.py:173-176",
            )
            for s in (0.5, 0.75, 0.875)
        ),
        # SpargeAttention: top-k 0.5 by default (runtime/layers/attention/backends/sparge_attn.py:19, :95)
        AttentionBackend(
            "sparge_attn", "sparse", False, 0.85 * sage_speed, 0.5, "",
            "runtime/layers/attention/backends/sparge_attn.py:19-28",
        ),
    )  # fmt: skip


RULES = RuleTable(
    engine=ENGINE,
    version=VERSION,
    rules=(
        Rule(
            field="ring",
            values=(2, 4, 8),
            needs={"attention": RING_CAPABLE},
            source="runtime/server_args/server_args.py:109, :1294-1303",
            why="Ring Attention requires a ring-capable backend (fa, sage_attn) (ValueError)",
        ),
        Rule(
            field="ring",
            values=(2, 4, 8),
            when={"cc": {"min": 12.0, "max": 12.9}},
            needs={"attention": ["sage_attn"]},
            source="runtime/platforms/cuda.py:520-529 (fa -> Torch SDPA on SM12x); runtime/layers/attention/"
            "layer.py:889-896; layers/attention/backends/attention_backend.py:59-63 (SDPA: no ring rotation), "
            "flash_attn.py:343, sage_attn.py:37",
            why="on SM12x fa runs Torch SDPA, which has no softmax LSE for the ring merge (RuntimeError at load); "
            "only sage_attn rings",
        ),
        Rule(
            field="attention",
            values=("fp8_fa_sm120",),
            needs={"cc": [12.0]},
            source="runtime/platforms/cuda.py:532-545",
            why="fp8_fa_sm120 needs an SM120 device (elsewhere it falls back to cuDNN SDPA)",
            effect="ignored",
        ),
        Rule(
            field="attention",
            values=("sparge_attn",),
            needs={"cc": [8.0, 8.6, 8.7, 8.9, 9.0]},
            source="runtime/platforms/cuda.py:214-232",
            why="SpargeAttention supports compute capability 8.0/8.6/8.7/8.9/9.0 only (ValueError)",
        ),
        Rule(
            field="tp",
            values=(),
            needs={"heads_split_ok": True},
            source="runtime/models/dits/wanvideo.py:524-525 (divide(num_heads, tp_size)); runtime/layers/usp.py:"
            "389-391 (assert heads % ulysses world size == 0)",
            why="attention heads must split evenly over tp x ulysses ranks (AssertionError)",
        ),
        Rule(
            field="cfg",
            values=(2,),
            needs={"uses_cfg": True},
            source="runtime/server_args/server_args.py:1683-1720 (CFG parallel only for models whose default "
            "sampling uses guidance; a request without CFG has one branch and the other rank recomputes it)",
            why="CFG parallel on a request without classifier-free guidance computes the same branch twice",
            effect="ignored",
        ),
        Rule(
            field="cache_dit",
            values=(True,),
            needs={"family": ["wan", "hunyuanvideo"]},
            source="runtime/cache/cache_dit_integration.py:378-380 (wan2.2 dual-transformer adapter), :570-580 "
            "(supported DiT families: Flux, QwenImage, HunyuanDiT, HunyuanVideo, Wan, ...)",
            why="cache-dit has no block adapter for this DiT (ValueError)",
        ),
    ),
)


def plan_facts(plan, model, workload, hw: HardwareProfile) -> dict:
    """The facts the rules read, for one plan (search.VideoPlan) of `model` under `workload` on `hw`."""
    return {
        "cc": compute_capability(hw.gpu.arch),
        "family": model.family,
        "heads": model.heads,
        "tp": plan.tp,
        "ulysses": plan.ulysses,
        "ring": plan.ring,
        "cfg": plan.cfg,
        "attention": plan.attention,
        "cache_dit": plan.cache_dit,
        "uses_cfg": workload.cfg,
        "heads_split_ok": model.heads % (plan.tp * plan.ulysses) == 0,
    }


def violations(plan, model, workload, hw: HardwareProfile) -> list[Violation]:
    return violations_of(RULES, plan_facts(plan, model, workload, hw))
