"""Per-op check of the performance model against an independent set of measured kernel tables: the op tables
AIConfigurator 0.12 installs (systems/data/<gpu>/<op>/vllm/<version>/*.parquet, measured by NVIDIA on the GPU),
read at run time from the path given. Nothing of those tables is copied into this repository and nothing in CI
depends on this script; it needs pandas + pyarrow, so run it with the interpreter that has them, e.g.

    PYTHONPATH=. /tmp/aic-venv/bin/python tests/bench/op_check.py \
        /tmp/aic-venv/lib/python3.11/site-packages/aiconfigurator_core/systems/data

For every point it builds the ops mi-tune's op list builds for that shape (oplist.py: the GEMM with its FP8
activation quantisation, the attention half of a layer, the routed-expert half, the all-reduce) and costs them
with the rates table of the GPU (ops.cost_ops, comm.all_reduce). Reported: |predicted / measured - 1| per point,
its median overall and per (GPU, op family) group, the signed median (bias) and how many groups are within 20%.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import glob
import os
import statistics
import sys

from autotune.capability.profiles import profile
from autotune.capability.profiles.vllm_0_34_0 import BLOCK_FP8_SM100_MOE
from autotune.catalog import load_preset
from autotune.catalog.devices import DEVICES_BY_KEY
from autotune.catalog.models import load_model
from autotune.perf import comm, fa2_decode, opcore, oplist, routing
from autotune.perf import efficiency as eff
from autotune.perf.ops import cost_ops
from autotune.specs import Accelerator, FfnSpec, Kernels, PhasePlan

# AIConfigurator system directory -> (mi-tune preset the box comes from, device whose datasheet the GPUs take)
SYSTEMS = {
    "h200_sxm": ("h200-x8", "h200-sxm"),
    "h100_sxm": ("h200-x8", "h100-sxm"),
    "b200_sxm": ("h200-x8", "b200"),
    "a100_sxm": ("a100-sxm-x8", "a100-sxm-80gb"),  # the only sm_80 tables (no a100_pcie data is installed)
    "l40s": ("l40s-x8", "l40s"),
    "rtx_pro_6000_server": ("rtx-pro-6000-x8", "rtx-pro-6000-server"),
}
GEMM_DTYPES = {"bfloat16": "bf16", "fp8": "fp8", "fp8_block": "fp8", "nvfp4": "fp4"}
MOE_DTYPES = {"bfloat16": "bf16", "fp8": "fp8", "fp8_block": "fp8", "nvfp4": "fp4", "int4_wo": "int4"}
FORMATS = {"fp8": "fp8_tensor", "fp8_block": "fp8_block", "nvfp4": "nvfp4"}  # the tables' checkpoint formats
MOE_KERNELS = (("marlin", "marlin"), ("triton", "triton"), ("cutlass", "flashinfer_cutlass"), ("trtllm", "cutlass"))
MLA_KERNELS = {"TRITON_MLA": "triton"}  # the others are FlashMLA / FlashAttention MLA / FlashInfer MLA: auto
# Rows whose measurement is not what mi-tune models: printed apart, left out of the headline figures.
APART = {
    "gemm_fp8_block": "timed without a CUDA graph, so the host's Python dispatch is in the figure (at least 57 us "
    "at any shape, 1 MFLOP included, where per-tensor FP8 takes 5 us): AIConfigurator's collector/vllm/"
    "collect_gemm.py passes use_cuda_graph=gemm_type != 'fp8_block' (github.com/ai-dynamo/aiconfigurator, commit "
    "00e9bde); its later tests/unit/collector test_gemm_publishes_only_graph_timing refuses such eager timings",
    "mla native-ops": "measured with vLLM's RMSNorm and rotary embedding running their native torch chains, not "
    "the CUDA kernels a serving engine runs (about 30 more kernels a module, vLLM 0.23.0 source: rms_norm's to-fp32 "
    "/ pow / mean / add / rsqrt / mul / to-bf16 / mul, vllm/ir/ops/layernorm.py:10-21, twice; DeepseekScalingRotary"
    "Embedding.forward_static's gather / repeat_interleave / neg / stack / mul / add, rotary_embedding/"
    "deepseek_scaling_rope.py:142-181): 'a batch-independent ~50-65us per layer that a serving engine never pays' "
    "(module glue under CUDA-graph replay on B200: native 74.1 us, fused vllm_c 21.0 us), AIConfigurator commit "
    "c56db49fe (#1423, 2026-07-29, collector/vllm/utils.py enable_engine_fused_ops), which asks for these tables' "
    "re-collection. Printed apart: the vLLM 0.24.0 tables committed in d5bad971c (2026-07-13; the installed files "
    "are byte-identical). A re-collected table says so in its collection_meta.yaml (norm_dispatch: "
    "vllm_c_eager_surrogate: B200's, headline), and its decode rows show no such floor: at batch <= 8 and context "
    "<= 2k, every head count, predicted minus measured is +3 us median (5th-95th percentile -9..+6) on B200 and "
    "-40 us (-52..-28) on H100 and H200",
    "moe untuned": "FlashInfer CUTLASS MoE on sm_90 (per-tensor FP8; block FP8 has one fixed tactic, "
    "flashinfer_cutlass_fused_moe_binding.cu:982-989, and stays counted) timed without FlashInfer's autotuner: "
    "AIConfigurator's collector/vllm/collect_moe.py (commit 095f58a) calls the FusedMoE module with no autotune() "
    "context (its TRT-LLM collector tunes), so AutoTuner.choose_one returns the fallback tactic -1 "
    "(flashinfer/autotuner/autotuner.py:1630-1660, flashinfer fb28d72), which the binding maps to the first "
    "profile (flashinfer_cutlass_fused_moe_binding.cu:992), on sm_90 the smallest grouped tile, CtaShape128x16x128B "
    "with a 1x1x1 cluster (nv_internal/.../cutlass_heuristic.cpp:223; the other GPUs' FlashInfer rows take the "
    "same fallback but their first tile is not N = 16: 128x128 on sm_100, Ampere 32x128 for bf16 / FP8 on sm_120, "
    "cutlass_heuristic.cpp:327-328, 132-133, 162-163, 631-636, and stay counted). vLLM 0.34 tunes "
    "FlashInfer at startup on cc >= 9.0 (model_executor/warmup/kernel_warmup.py:385-393, on at -O1..-O3: "
    "config/vllm.py:301-364)",
    "allreduce shared-link": "AIConfigurator's L40S all-reduce rows at 4 and 8 GPUs describe a box whose 4-8 GPU "
    "traffic crosses one shared link, not the l40s-x8 preset (own Gen4 x16 link per GPU, per-socket switch uplinks, "
    "22 GB/s between sockets): from 16 MiB to 1 GiB the ring's busbw (2(p-1)/p x bytes / time) is 3.7-3.8 GB/s at 4 "
    "GPUs and 1.9-2.0 at 8, so p x busbw stays at 14.8-15.7 GB/s for both, where a ring over per-GPU links keeps "
    "busbw itself flat in p (nccl-tests doc/PERFORMANCE.md: 'a bus bandwidth which should be independent of the "
    "number of ranks'); "
    "the same table's 2-GPU rows reach 18.8-19.2 GB/s each. The system file (systems/l40s.yaml) records no "
    "topology; the same directory's NCCL table (comm/nccl/2.27.3) shows the same p x busbw fall",
    "moe old-defaults": "vLLM's Triton fused MoE before vllm-project/vllm#34846 (merged 2026-02-18; the A100 table: "
    "vLLM 0.14.0, released January 2026) ran a shape without a tuned config file on the old default config, "
    "BLOCK_SIZE 64 x 64 x 32 (16 x 32 x 64 while M <= E) with num_warps / num_stages never set; #34846 made it "
    "batch-aware (BLOCK_SIZE_M 16 -> 128, BLOCK_SIZE_K 64 / 128, 8 warps above M = 128: vLLM 0.34 fused_moe.py:"
    "1461-1507) and reports 'up to 2x speedup at large batch size'. No (E, N) of that table has an A100 file in "
    "vLLM 0.34's fused_moe/configs, so vLLM 0.34 runs the new default on every row. vllm-project/vllm#40542 "
    "times that default on an A100 SXM4 80GB (calibration.yaml kernel-vllm-fused-moe-default-a100-e64: E=64, N=1408, "
    "K=2048, top-6, bf16): 542.6 / 698.1 / 769.5 / 1022.5 / 2919.0 us at M = 16 / 64 / 256 / 1,024 / 4,096, where "
    "the op list prices 515 / 692 / 711 / 1,003 / 3,038 us (calibration_check op28_rows; at M = 1 / 4 it measures "
    "183.5 / 266.2 us against 80 / 229)",
    "moe ep>1": "vLLM before 0.34 (the tables: 0.24) launches GEMM blocks for every routed slot on every EP rank "
    "and zero-fills the remote ones (vllm-0.23.0 fused_moe.py:160-161; activation and moe_sum over all M x top-k "
    "rows); vLLM 0.34, which mi-tune models, skips them at alignment (fused_moe/experts/triton_moe.py:398-416)",
}
# Tables of a vLLM whose Triton fused MoE ran the pre-#34846 default config (APART "moe old-defaults"): 0.14.x, the
# A100 table's, predates the merge; the other tables are 0.24.0.
OLD_MOE_DEFAULTS_BEFORE = (0, 15)
POINTS_PER_GROUP = 150  # every k-th row of a group, so a run takes seconds


def box(system: str):
    """The mi-tune HardwareProfile of an AIConfigurator system: the preset's box with the device's datasheet."""
    preset, device = SYSTEMS[system]
    hw = load_preset(preset)
    spec = DEVICES_BY_KEY[device]
    gpus = tuple(
        dataclasses.replace(
            a, name=spec.name, memory_gib=spec.memory_gib, mem_bw_gbs=spec.mem_bw_gbs,
            peak_tflops=dict(spec.peak_tflops), arch=spec.arch, features=spec.features,
            nvlink_gbs=spec.nvlink_gbs or a.nvlink_gbs,
        )
        for a in hw.accelerators
    )  # fmt: skip
    assert all(isinstance(a, Accelerator) for a in gpus)
    return dataclasses.replace(hw, name=f"{system} (op_check)", accelerators=gpus, measured=None, corrections={})


def latest(root: str, system: str, op_dir: str, filename: str) -> str | None:
    paths = sorted(glob.glob(os.path.join(root, system, op_dir, "vllm", "*", filename)), key=_version_key)
    return paths[-1] if paths else None


def _version_key(path: str) -> tuple:
    version = path.split(os.sep)[-2]
    return tuple(int(p) if p.isdigit() else 0 for p in version.replace("rc", ".").split("."))


def _thin(frame):
    step = max(1, len(frame) // POINTS_PER_GROUP)
    return frame.iloc[::step]


def _context(model, hw, tp=1, dp=1, ep=1, kernels=Kernels()):
    phase = PhasePlan(
        gpus=tuple(range(tp * dp)), tp=tp, dp=dp, ep=ep, dp_attention=dp > 1, kernels=kernels
    )  # fmt: skip
    return opcore.context(model, phase, "vllm", hw, phase.gpus)


def _seconds(c, ops) -> float:
    return cost_ops(c, ops).time_s


def gemm_points(root, system, hw, model):
    import pandas as pd

    path = latest(root, system, "gemm", "gemm_perf.parquet")
    if not path:
        return
    frame = pd.read_parquet(path)
    for dtype_name, dtype in GEMM_DTYPES.items():
        rows = frame[frame.gemm_dtype == dtype_name]
        if rows.empty or (dtype != "bf16" and not hw.gpu.peak_tflops.get(dtype)):
            continue
        stored = {"bf16": "bf16", "fp8": "fp8", "fp4": "fp4"}[dtype]
        spec = dataclasses.replace(model, dense_dtype=stored, dense_format=FORMATS.get(dtype_name, stored))
        c = _context(spec, hw)
        for r in _thin(rows).itertuples():
            ops = oplist.linear_ops(c, float(r.m), int(r.n), int(r.k), "op_check")
            yield f"gemm_{dtype_name}", _seconds(c, ops), r.latency * 1e-3


def attention_points(root, system, hw, model):
    import pandas as pd

    for filename, phase_name in (("generation_attention_perf.parquet", "decode"),
                                 ("context_attention_perf.parquet", "prefill")):  # fmt: skip
        path = latest(root, system, "attention", filename)
        if not path:
            continue
        frame = pd.read_parquet(path)
        window = frame.window_size == 0 if "window_size" in frame else True  # older tables (a100_sxm's) lack it
        frame = frame[(frame.kv_cache_dtype == "bfloat16") & window]
        c = _context(model, hw)
        for r in _thin(frame).itertuples():
            heads, kv_heads, head_dim = int(r.num_heads), int(r.num_key_value_heads), int(r.head_dim)
            att = dataclasses.replace(
                model.layers[0].attention, num_heads=heads, num_kv_heads=kv_heads, score_dim=2 * head_dim,
                kv_elems_per_token=2 * kv_heads * head_dim, kv_read_elems_per_token=2 * kv_heads * head_dim,
            )  # fmt: skip
            if phase_name == "decode":
                x = opcore.StepInput(decode_seqs=float(r.batch_size), decode_ctx=float(r.isl + r.step))
            else:  # a batch of whole prompts: each token attends its prefix, isl / 2 on average (causal)
                x = opcore.StepInput(prefill_tokens=float(r.batch_size * r.isl), prefill_ctx=float(r.isl) / 2)
            # the kernels vLLM's attention backend runs per call: the KV-cache write, then attention
            # (FlashAttentionImpl.forward: reshape_and_cache_flash, vllm/v1/attention/backends/flash_attn.py:1490)
            # with the kernel call's own copies (FA2's head swap: tiles.fa2_swap_copies)
            kept = ("kv cache write", fa2_decode.FA2_COPIES_SOURCE)
            ops = [op for op in oplist.attention_ops(c, att, x) if op.kind == "attention" or op.source in kept]
            yield f"attn_{phase_name}", _seconds(c, ops), r.latency * 1e-3


def _heads(att, heads: int):
    """The MLA attention of a row measured with `heads` query heads (per rank x tp_size; the tables sweep the
    heads a TP rank keeps): the head-split projections (q_b, kv_b, o) scale with the heads, q_a / kv_a do not."""
    split = att.params - att.replicated_params
    params = att.replicated_params + round(split * heads / att.num_heads)
    return dataclasses.replace(att, num_heads=heads, params=params)


def mla_points(root, system, hw, model):
    import pandas as pd

    for filename, phase_name in (("mla_generation_module_perf.parquet", "decode"),
                                 ("mla_context_module_perf.parquet", "prefill")):  # fmt: skip
        path = latest(root, system, "mla", filename)
        if not path:
            continue
        frame = pd.read_parquet(path)
        tag = [] if _fused_norms(path, filename) else ["mla native-ops"]
        # every backend's rows stay in: a context row's kernel_source is the MLA prefill backend that ran it
        # (FLASH_ATTN: FlashAttention varlen over the up-projected keys, the path mi-tune costs as MLA prefill),
        # or the decode backend when vLLM ran the whole batch as decodes (single-token prompts, and prompts under
        # the absorbed path's threshold): AIConfigurator's collector/vllm/collect_mla_module.py, _mla_backend_name
        # (github.com/ai-dynamo/aiconfigurator). The FLASH_ATTN rows, left out before with no reason recorded,
        # are most of the table's prefill rows.
        frame = frame[(frame.kv_cache_dtype == "bfloat16") & (frame.gemm_type == "bfloat16")]
        spec = dataclasses.replace(model, dense_dtype="bf16")
        for r in _thin(frame).itertuples():
            tp = int(r.tp_size)
            if tp not in (1, 2, 4, 8):
                continue
            kernels = Kernels(attention=MLA_KERNELS.get(r.kernel_source, "auto"))
            c = _context(spec, hw, tp=tp, kernels=kernels)
            att = _heads(spec.layers[-1].attention, int(r.num_heads) * tp)
            if phase_name == "decode":
                x = opcore.StepInput(decode_seqs=float(r.batch_size), decode_ctx=float(r.isl + r.step))
            else:
                x = opcore.StepInput(prefill_tokens=float(r.batch_size * r.isl), prefill_ctx=float(r.isl) / 2)
            yield f"mla_{phase_name}", _seconds(c, oplist.attention_ops(c, att, x)), r.latency * 1e-3, *tag


def mla_bmm_points(root, system, hw, model):
    """The absorbed MLA's two batched GEMMs of a decode step (W_UK_T before the kernel, mla_gen_pre; W_UV after
    it, mla_gen_post; vLLM's torch.bmm on kv_b dequantised to bf16) against the op list's 'mla absorb' op: the
    pair at one (tokens, heads per rank) measured as the sum of the two rows."""
    import pandas as pd

    path = latest(root, system, "mla_bmm", "mla_bmm_perf.parquet")
    if not path:
        return
    frame = pd.read_parquet(path)
    frame = frame[frame.bmm_dtype == "bfloat16"]
    pre, post = (frame[frame.op_name == name].set_index(["num_tokens", "num_heads"]).latency
                 for name in ("mla_gen_pre", "mla_gen_post"))  # fmt: skip
    pairs = (pre + post).dropna().reset_index()
    spec = dataclasses.replace(model, dense_dtype="bf16")
    c = _context(spec, hw)
    for r in _thin(pairs).itertuples():
        att = _heads(spec.layers[-1].attention, int(r.num_heads))
        x = opcore.StepInput(decode_seqs=float(r.num_tokens), decode_ctx=1024.0)
        ops = [op for op in oplist.attention_ops(c, att, x) if op.source == "mla absorb"]
        yield "mla_bmm", _seconds(c, ops), r.latency * 1e-3


def _fused_norms(path: str, filename: str) -> bool:
    """Whether the module table at `path` was measured with vLLM's fused CUDA norm / rotary kernels: its
    collection_meta.yaml records the norm dispatch for the table (APART's "mla native-ops")."""
    import yaml

    meta_path = os.path.join(os.path.dirname(path), "collection_meta.yaml")
    if not os.path.exists(meta_path):
        return False
    with open(meta_path) as f:
        meta = yaml.safe_load(f) or {}
    table = (meta.get("tables") or {}).get(filename.removesuffix(".parquet")) or {}
    return bool(table.get("norm_dispatch"))


# How AIConfigurator's MoE tables route: the power_law_1.01 rows draw each expert's token count from a power law
# (collector/helper.py _generate_power_law_distribution, which vllm/collect_moe.py's power_law_logits_v3 calls;
# github.com/ai-dynamo/aiconfigurator): E samples x ~ x^-alpha on [1, 0.8 T] (on [0.01, 2] when T x top-k <= E),
# scaled to T x top-k routed rows and rounded (half to even), the rounding residue added one by one to the largest
# counts or taken from the smallest. Many experts round to none, so a batch hits fewer experts than the model's
# routing prior (efficiency.ROUTING_SKEW, 0.5): at E=384, top-8 it hits 266 / 292 / 310 experts at T = 128 / 256 /
# 512 where the prior hits 334 / 375 / 384. A weight-bound MoE row streams the experts it hits, so the check prices
# each row at the table's routing: the rank-popularity skew whose routing.distinct_experts equals the generator's
# expected hit count (a property of the measurement's input, read from its source, not of its timings). Why it
# matters: RTX PRO 6000 Server, int4_wo, E=384 top-8 h7168 i2048, 256-1,024 tokens (weight-bound, 0.53 B a weight):
# at the prior's ~375-384 experts the rows would stream 1.5-1.7 TB/s, above the part's 1.6 TB/s datasheet; at the
# generator's 292-324 they stream 1.24-1.30 TB/s, 0.78-0.81 of it (rates.STREAM_FRACTION is 0.80). Left out: a
# token given the same expert twice (an expert with more than T rows) takes another at vLLM's top-k over tied logits.
TABLE_ROUTING_ALPHA = 1.01
TABLE_ROUTING_DRAWS = 64


@functools.lru_cache(maxsize=4096)
def table_experts_hit(tokens: int, experts: int, top_k: int) -> float:
    """Mean experts with at least one routed row over TABLE_ROUTING_DRAWS seeded draws of the table's generator."""
    import numpy as np

    rng, routed, a = np.random.default_rng(0), tokens * top_k, 1.0 - TABLE_ROUTING_ALPHA
    lo, hi = (1.0, 0.8 * tokens) if routed > experts else (0.01, 2.0)
    hits = []
    for _ in range(TABLE_ROUTING_DRAWS):
        x = ((hi**a - lo**a) * rng.random(experts) + lo**a) ** (1.0 / a)
        counts = np.rint(x / x.sum() * routed).astype(np.int64)
        delta = int(routed - counts.sum())
        order = np.argsort(-counts, kind="stable")
        if delta > 0:
            np.add.at(counts, order[np.arange(delta) % experts], 1)
        for i in range(-delta):
            idx = order[-(i % experts) - 1]
            counts[idx if counts[idx] > 0 else int(np.argmax(counts))] -= 1
        hits.append(np.count_nonzero(counts))
    return float(np.mean(hits))


@functools.lru_cache(maxsize=4096)
def table_routing_skew(tokens: int, experts: int, top_k: int) -> float:
    """The routing skew at which routing.distinct_experts hits table_experts_hit's count (bisection; 0 where the
    table hits as many as uniform routing, the bracket's end where it hits fewer than any skew in it gives)."""
    target = table_experts_hit(tokens, experts, top_k)
    lo, hi = 0.0, 8.0
    if routing.distinct_experts(experts, top_k, tokens, lo) <= target:
        return lo
    for _ in range(24):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if routing.distinct_experts(experts, top_k, tokens, mid) > target else (lo, mid)
    return (lo + hi) / 2


@contextlib.contextmanager
def routing_skew(skew: float):
    """efficiency.ROUTING_SKEW set to `skew` while the op list of one row is built (a new FfnSpec per row, so the
    Context's FfnShape is computed under it)."""
    saved, eff.ROUTING_SKEW = eff.ROUTING_SKEW, skew
    try:
        yield
    finally:
        eff.ROUTING_SKEW = saved


def moe_points(root, system, hw, model):
    import pandas as pd

    path = latest(root, system, "moe", "moe_perf.parquet")
    if not path:
        return
    frame = pd.read_parquet(path)
    frame = frame[(frame.distribution == "power_law_1.01") & (frame.moe_tp_size == 1)]
    old = _version_key(path) < OLD_MOE_DEFAULTS_BEFORE  # APART "moe old-defaults"
    for dtype_name, dtype in MOE_DTYPES.items():
        rows = frame[frame.moe_dtype == dtype_name]
        if rows.empty:
            continue
        for r in (*_thin(rows[rows.moe_ep_size == 1]).itertuples(), *_thin(rows[rows.moe_ep_size > 1]).itertuples()):
            kernel = next((k for key, k in MOE_KERNELS if key in r.kernel_source), "auto")
            if dtype_name == "fp8_block" and "trtllm" in r.kernel_source:  # DeepSeekFp8 mode: its own kernel value
                kernel = BLOCK_FP8_SM100_MOE
            ep = int(r.moe_ep_size)
            hidden, inter = int(r.hidden_size), int(r.inter_size)
            ffn = FfnSpec("moe", 0, int(r.num_experts), int(r.topk), 3 * hidden * inter)
            spec = dataclasses.replace(model, hidden_size=hidden, expert_dtype=dtype,
                                       expert_format=FORMATS.get(dtype_name, dtype))  # fmt: skip
            c = _context(spec, hw, dp=ep, ep=ep, kernels=Kernels(moe=kernel))
            with routing_skew(table_routing_skew(int(r.num_tokens), int(r.num_experts), int(r.topk))):
                ops = [op for op in oplist.ffn_ops(c, ffn, float(r.num_tokens)) if op.kind != "collective"]
            ops = [op for op in ops if op.kind != "norm"]
            untuned = kernel == "flashinfer_cutlass" and hw.gpu.arch == "sm_90" and dtype_name != "fp8_block"
            triton = kernel == "triton" or r.kernel_source == "vllm_fused_moe"  # vLLM's Triton fused_moe
            tags = ["moe untuned"] * untuned + ["moe ep>1"] * (ep > 1) + ["moe old-defaults"] * (old and triton)
            yield f"moe_{dtype_name}", _seconds(c, ops), r.latency * 1e-3, *tags


def sglang_moe_points(root, system, hw, model):
    """SGLang's Triton fused MoE (the kernel its auto pick runs for block-FP8 experts without DeepEP,
    capability/profiles/sglang_0_5_23.py auto_moe_kernel) with TP-sharded experts (moe_tp_size > 1, EP 1): the
    shapes an SGLang TP plan runs, e.g. DeepSeek-R1 TP8's 256-wide expert slices, whose down projection reduces over
    two 128-wide K blocks. moe_points reads vLLM's tables at moe_tp_size 1 only (4096-wide gate / up, 2048-deep
    down), so this is the only check of those shapes; priced by the sglang profile's op list."""
    import pandas as pd

    paths = sorted(glob.glob(os.path.join(root, system, "moe", "sglang", "*", "moe_perf.parquet")), key=_version_key)
    if not paths:
        return
    frame = pd.read_parquet(paths[-1])
    frame = frame[(frame.distribution == "power_law_1.01") & (frame.moe_ep_size == 1) & (frame.moe_tp_size > 1)]
    frame = frame[(frame.kernel_source == "sglang_fused_moe_triton") & (frame.moe_dtype == "fp8_block")]
    for r in _thin(frame).itertuples():
        tp, hidden, inter = int(r.moe_tp_size), int(r.hidden_size), int(r.inter_size)
        ffn = FfnSpec("moe", 0, int(r.num_experts), int(r.topk), 3 * hidden * inter)
        spec = dataclasses.replace(model, hidden_size=hidden, expert_dtype="fp8", expert_format="fp8_block")
        phase = PhasePlan(gpus=tuple(range(tp)), tp=tp, kernels=Kernels(moe="triton"))
        c = opcore.context(spec, phase, "sglang", hw, phase.gpus)
        with routing_skew(table_routing_skew(int(r.num_tokens), int(r.num_experts), int(r.topk))):
            ops = [op for op in oplist.ffn_ops(c, ffn, float(r.num_tokens)) if op.kind not in ("collective", "norm")]
        yield "moe_fp8_block sglang-tp", _seconds(c, ops), r.latency * 1e-3


# SGLang's context-MLA tables' kernels -> mi-tune's attention kernel (fa3 is SGLang's sm_90 pick, trtllm_mla its sm_100
# one for an MLA model: the plan's `auto`)
SGLANG_MLA_KERNELS = {"flash_attention": "auto", "trtllm_mla": "auto", "triton": "triton"}


def sglang_mla_points(root, system, hw, model):
    """SGLang's MLA prefill attention kernel (its context_mla tables: the attention alone, no projections) for the
    prompt-carrying steps SGLang 0.5.23 replays in its breakable prefill CUDA graph (at most the graph's step tokens,
    opcore.Context.mla_absorbed_step_tokens), which run the absorbed method over the latent KV
    (srt/models/deepseek_common/attention_backend_handler.py:108-113): the op list's attention ops of that step.
    Larger steps run MHA eagerly; the tables time them as the smaller ones (their time per token pair does not
    change at the cap), so they are not what SGLang runs there and are left out."""
    import pandas as pd

    paths = sorted(glob.glob(os.path.join(root, system, "mla", "sglang", "*", "context_mla_perf.parquet")),
                   key=_version_key)  # fmt: skip
    if not paths:
        return
    frame = pd.read_parquet(paths[-1])
    frame = frame[(frame.kv_cache_dtype == "bfloat16") & (frame.isl > 1)]
    spec = dataclasses.replace(model, dense_dtype="bf16")
    for r in _thin(frame).itertuples():
        phase = PhasePlan(gpus=tuple(range(8)), tp=8, kernels=Kernels(attention=SGLANG_MLA_KERNELS[r.kernel_source]))
        c = opcore.context(spec, phase, "sglang", hw, phase.gpus)
        x = opcore.StepInput(prefill_tokens=float(r.batch_size * r.isl), prefill_ctx=float(r.isl) / 2)
        if x.prefill_tokens > c.mla_absorbed_step_tokens:
            continue
        ops = oplist.attention_ops(c, _heads(spec.layers[-1].attention, int(r.num_heads) * 8), x)
        yield "mla_prefill sglang", _seconds(c, [op for op in ops if op.kind == "attention"]), r.latency * 1e-3


def allreduce_points(root, system, hw, model):
    import pandas as pd

    paths = sorted(glob.glob(os.path.join(root, system, "comm", "vllm", "*", "custom_allreduce_perf.parquet")),
                   key=_version_key)  # fmt: skip
    if not paths:
        return
    frame = pd.read_parquet(paths[-1])
    frame = frame[frame.kernel_source == "vLLM_custom_graph"]
    for r in _thin(frame).itertuples():
        group = tuple(range(int(r.num_gpus)))
        nbytes = float(r.message_size) * 2  # message_size counts bf16 elements
        shared = ["allreduce shared-link"] * (system == "l40s" and len(group) >= 4)  # APART's reason
        yield "allreduce", table_dispatch_s(hw, group, nbytes), r.latency * 1e-3, *shared


def table_dispatch_s(hw, group: tuple[int, ...], nbytes: float) -> float:
    """vLLM's all-reduce dispatch as the tables' versions (vLLM <= 0.24) ran it: the vLLM profile's P2P paths in
    order without FlashInfer's standalone all-reduce, then NCCL. FlashInfer was opt-in before vllm-project/vllm#52998
    (2026-08-19, "Enable FlashInfer all-reduce by default"): VLLM_ALLREDUCE_USE_FLASHINFER defaults to "0" in
    vllm-0.23.0 envs.py:1764-1766 (on in 0.34, vllm/envs.py:2070-2072, which mi-tune models); the custom kernel's
    and symmetric memory's size tables are the same in both (vllm-0.23.0 all_reduce_utils.py:31-76)."""
    arch, link = hw.gpu.arch, comm.transport(comm.topology(hw), group)
    for path in profile("vllm").allreduce_paths(arch, len(group), link) if len(group) > 1 else ():
        if path.name != "flashinfer" and nbytes <= path.max_bytes:
            return comm.path_s(hw, group, path, nbytes)
    return comm.all_reduce(hw, group, nbytes, "nccl")[1]


CHECKS = (gemm_points, attention_points, mla_points, mla_bmm_points, moe_points, allreduce_points)
# SGLang's own tables at the shapes an SGLang plan runs, printed in a table of their own (hopper36): the headline
# above stays the vLLM tables' figure it has been since op_check began
SGLANG_CHECKS = (sglang_moe_points, sglang_mla_points)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", help="AIConfigurator's systems/data directory (site-packages/aiconfigurator_core/...)")
    parser.add_argument("--systems", nargs="*", default=list(SYSTEMS))
    args = parser.parse_args(argv)
    if not os.path.isdir(args.data):
        print(f"op_check: {args.data}: expected AIConfigurator's systems/data directory", file=sys.stderr)
        return 2
    gqa, mla = load_model("llama-3.1-70b"), load_model("deepseek-v3")
    groups: dict[tuple[str, str], list[float]] = {}  # (GPU, family) -> signed errors of the headline rows
    apart: dict[tuple[str, str], list[float]] = {}  # (GPU, family [ep>1]) -> signed errors of the rows printed apart
    for system in args.systems:
        hw = box(system)
        for check in CHECKS:
            model = mla if check in (mla_points, mla_bmm_points, moe_points) else gqa
            for family, predicted, measured, *tag in check(args.data, system, hw, model):
                if measured <= 0 or predicted <= 0:
                    continue
                reason = next((t for t in tag if t in APART), family if family in APART else None)
                name = f"{family} {reason.split()[-1]}" if reason and reason != family else family
                (apart if reason else groups).setdefault((system, name), []).append(predicted / measured - 1)
    print(f"{'gpu':22} {'op family':18} {'points':>6} {'median |err|':>12} {'median signed':>14}")
    within = _table(groups)
    errors = [abs(e) for es in groups.values() for e in es]
    print(f"\n{len(errors)} points, median |err| {statistics.median(errors):.1%}; "
          f"{within} of {len(groups)} (GPU, op family) groups within 20%")  # fmt: skip
    print("\nPrinted apart (not what mi-tune models, left out of the figures above):")
    _table(apart)
    for name, why in APART.items():
        print(f"  {name}: {why}")
    sglang: dict[tuple[str, str], list[float]] = {}
    for system in args.systems:
        hw = box(system)
        for check in SGLANG_CHECKS:
            for family, predicted, measured in check(args.data, system, hw, mla):
                if measured > 0 and predicted > 0:
                    sglang.setdefault((system, family), []).append(predicted / measured - 1)
    print("\nSGLang's kernels (its own tables, the shapes an SGLang plan runs; not in the figures above):")
    within = _table(sglang)
    print(f"  {within} of {len(sglang)} groups within 20%")
    everything = {**groups, **apart}
    errors = [abs(e) for es in everything.values() for e in es]
    within = sum(statistics.median(abs(e) for e in es) <= 0.20 for es in everything.values())
    print(f"  all rows together: {len(errors)} points, median |err| {statistics.median(errors):.1%}; "
          f"{within} of {len(everything)} groups within 20%")  # fmt: skip
    return 0


def _table(groups) -> int:
    """Print one line per (GPU, family) group; return how many have a median |error| within 20%."""
    within = 0
    for (system, family), es in sorted(groups.items()):
        med = statistics.median(abs(e) for e in es)
        within += med <= 0.20
        print(f"{system:22} {family:18} {len(es):6d} {med:12.1%} {statistics.median(es):+14.1%}")
    return within


if __name__ == "__main__":
    raise SystemExit(main())
