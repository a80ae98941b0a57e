"""A Gated DeltaNet layer's prompt tokens, kernel by kernel (perf/linear_attention.py prefill_path): the engines run
either FlashInfer's one-kernel GDN prefill or the FLA Triton chunked chain (vLLM's six vendored kernels:
third_party/flash_linear_attention/ops/chunk.py:37-81; SGLang's four, its kkt + solve_tril + w / u fused:
kernels/ops/attention/fla/chunk.py:49-82), chosen per GPU (vLLM qwen_gdn_linear_attn.py _resolve_gdn_prefill_backend;
SGLang gdn_backend.py flashinfer_gdn_prefill_default), with their preparation / gate / state launches around it.
The op list carries the scan with its kernel count and a preparation op with the launches around it."""

from __future__ import annotations

import dataclasses

import pytest

from autotune.catalog import load_model, load_preset
from autotune.perf import costing, linear_attention, oplist
from autotune.perf.opcore import StepInput, context
from autotune.specs import Batching, PhasePlan
from tests.perf.boxes import b200_box

MODEL = "qwen3.5-35b-a3b"
PROMPT = StepInput(prefill_tokens=8192)


def _gdn(m):
    return next(layer.attention for layer in m.layers if layer.attention.kind == "gdn")


def _ops(engine: str, hw, m=None, chunk: int = 8192, x: StepInput = PROMPT):
    m = m or load_model(MODEL)
    phase = PhasePlan(gpus=(0,), tp=1, batching=Batching(max_running=64, chunked_prefill_tokens=chunk))
    c = context(m, phase, engine, hw, (0,))
    return c, oplist.attention_ops(c, _gdn(m), x)


def _scan(ops):
    (op,) = [op for op in ops if op.source == "linear attention (gdn)"]
    return op


def _prep(ops):
    return [op for op in ops if op.source == "linear attention prep"]


@pytest.mark.parametrize(("engine", "scan", "side"), [("vllm", 6, 3), ("sglang", 4, 4)])
@pytest.mark.parametrize("preset", ["a100-sxm-x8", "l40s-x8"])
def test_triton_chain_counts_its_kernels(engine, scan, side, preset):
    """Off the FlashInfer archs both engines run the FLA Triton chain: vLLM 6 kernels with its fused_post_conv_prep
    and the state gather / scatter around them, SGLang 4 with its q / k / v split, gates and two L2 norms."""
    _, ops = _ops(engine, load_preset(preset))
    assert _scan(ops).count == scan
    (prep,) = _prep(ops)
    assert prep.count == side and prep.kind == "elementwise" and prep.nbytes > 0


@pytest.mark.parametrize(("engine", "side"), [("vllm", 3), ("sglang", 10)])
def test_hopper_runs_flashinfer_one_kernel(engine, side):
    """sm_90: both engines default to FlashInfer's GDN prefill (head dims 128, fp32 state, SGLang's chunk <= 32k),
    one kernel, at its own speed, moving no per-chunk state."""
    c, ops = _ops(engine, load_preset("h200-x8"))
    scan = _scan(ops)
    assert scan.count == 1 and scan.speed == linear_attention.FUSED_SPEED
    assert _prep(ops)[0].count == side


def test_sglang_long_chunk_falls_back_to_triton_on_hopper():
    """SGLang keeps Triton when the static chunk exceeds 32,768 tokens (gdn_backend.py:210-222)."""
    _, ops = _ops("sglang", load_preset("h200-x8"), chunk=65536)
    assert _scan(ops).count == 4 and _scan(ops).speed == linear_attention.CHAIN_SPEED


@pytest.mark.parametrize(("state_dtype", "fused"), [("fp32", False), ("bf16", True)])
def test_sglang_blackwell_needs_bf16_state(state_dtype, fused):
    """SGLang on sm_100 takes FlashInfer only over a bf16 state pool; vLLM takes it at either (the state is cast)."""
    m = dataclasses.replace(load_model(MODEL), state_dtype=state_dtype)
    _, ops = _ops("sglang", b200_box(), m=m)
    assert (_scan(ops).count == 1) is fused
    _, ops = _ops("vllm", b200_box(), m=m)
    assert _scan(ops).count == 1


def test_flashinfer_needs_head_dim_128():
    """FlashInfer's kernel takes head size 128 only: another head width runs the Triton chain on any arch."""
    m = load_model(MODEL)
    att = _gdn(m)
    narrow = dataclasses.replace(att, score_dim=128, state_elems_per_seq=att.num_heads * 64 * 64)
    assert linear_attention.head_dims(narrow) == (64.0, 64.0)
    path = linear_attention.prefill_path("vllm", narrow, "sm_90", 8192, "fp32")
    assert not path.fused and path.scan_kernels == 6
    assert linear_attention.prefill_path("vllm", att, "sm_90", 8192, "fp32").fused


def test_chain_state_pass_is_bf16_whatever_the_state_dtype():
    """chunk_gated_delta_rule_fwd_h materialises the per-chunk state h in the activations' dtype
    (`k.new_empty(B, NT, H, V, K)`), not the recurrent state's: the chain's bytes do not follow state_dtype."""
    hw = load_preset("a100-sxm-x8")
    scans = []
    for dtype in ("fp32", "bf16"):
        _, ops = _ops("vllm", hw, m=dataclasses.replace(load_model(MODEL), state_dtype=dtype))
        scans.append(_scan(ops).nbytes)
    assert scans[0] == scans[1]


def test_fused_path_moves_fewer_bytes_for_the_same_products():
    """FlashInfer keeps the state and the WY intermediates on chip: the same FLOPs as the chain, a fraction of its
    bytes (the chain writes and reads A, w, u, v_new and h through memory)."""
    att = _gdn(load_model(MODEL))
    chain = linear_attention.chain_prefill_cost(att, 8192, 1)
    fused = linear_attention.fused_prefill_cost(att, 8192, 1)
    assert chain.flops == fused.flops
    assert fused.nbytes < chain.nbytes / 3
    # the per-chunk state pass: 2 x d_k x d_v bf16 per CHUNK tokens and value head, the chain's bytes grow with it
    d_k, d_v = linear_attention.head_dims(att)
    h_bytes = 8192 * att.num_heads * 2 * d_k * d_v * 2 / linear_attention.CHUNK
    assert chain.nbytes - fused.nbytes > h_bytes


def test_kernel_floors_are_paid_per_launch():
    """The chain's six kernels each pay the prefill attention floor, the launches around it the elementwise floor: a
    tiny prompt costs the vLLM chain more than FlashInfer's one kernel on the same box rates."""
    tiny = StepInput(prefill_tokens=16)
    hw = load_preset("a100-sxm-x8")
    c, ops = _ops("vllm", hw, x=tiny)
    chain_s = costing.cost_ops(c, [_scan(ops)]).time_s
    r = c.table.get("attention", "bf16", "prefill")
    assert chain_s >= 6 * r.min_us * 1e-6


def test_kda_keeps_one_scan_op():
    """Kimi Delta Attention (GLM-5.3-Flash's linear layers) keeps its one scan op at the prior SCAN_SPEED."""
    m = load_model("glm-5.3-flash")
    att = next(layer.attention for layer in m.layers if layer.attention.kind == "kda")
    phase = PhasePlan(gpus=(0,), tp=1)
    c = context(m, phase, "vllm", load_preset("h200-x8"), (0,))
    ops = oplist.attention_ops(c, att, PROMPT)
    (scan,) = [op for op in ops if op.source == "linear attention (kda)"]
    assert scan.count == 1 and scan.speed == linear_attention.SCAN_SPEED
    assert not _prep(ops)


def test_engine_without_gdn_kernels_keeps_one_scan_op():
    """vllm-ascend runs its own Triton-Ascend FLA port (vllm_ascend/ops/triton/fla), whose launches its profile does
    not list: the GDN scan stays the one op at the prior, as before."""
    m = load_model(MODEL)
    phase = PhasePlan(gpus=(0,), tp=1)
    c = context(m, phase, "vllm-ascend", load_preset("atlas-800i-a2"), (0,))
    ops = oplist.attention_ops(c, _gdn(m), PROMPT)
    scan = _scan(ops)
    assert scan.count == 1 and scan.speed == linear_attention.SCAN_SPEED
    assert not _prep(ops)
