"""The step-independent parts of a layer kind's FFN half under one Context (FfnShape): the dense / shared GEMM pair's
layout, weights and quantisation kernels, the routed experts' weights, tile-wave GEMMs and EP spread, the router's
weights; everything oplist._ffn_ops and router_ops read of the model, the plan, the engine and the box. Computed
once per (Context, FFN spec) (ffn_shape), so that building a step's FFN ops is the token-dependent arithmetic only.
Each value is computed by the same float operations, in the same order, as the op builders used to per step, so
the ops (and every prediction) are bit-identical."""

from __future__ import annotations

import math
from dataclasses import dataclass

from autotune.perf import efficiency as eff
from autotune.perf import ep_balance, precision
from autotune.perf.opcore import Context, Op, _act_bytes, _gemm, _op_new, dense_op_dtype
from autotune.perf.routing import LOGIT_BYTES, _miss_rates
from autotune.perf.sharding import dense_layout, layout_shards, shared_expert_layout
from autotune.specs import FfnSpec


@dataclass(frozen=True, slots=True)
class EpSpread:
    """The step-independent parts of ep_imbalance (busiest_load): the placement's skew (Context.imbalance) and
    the expected maximum over the ep ranks (ep_balance.expected_max_normal). Slots, like FfnShape."""

    ep: int
    imbalance: float  # Context.imbalance: the busiest rank's load at an infinite batch
    z: float  # ep_balance.expected_max_normal(ep)
    skew_sq: float  # the skew term squared: ((imbalance - 1) / z)^2
    sampling: float  # 1 - 1 / ep: the multinomial spread's numerator


def ep_spread(c: Context) -> EpSpread:
    ep = c.phase.ep
    if ep <= 1:
        return EpSpread(ep, c.imbalance, 0.0, 0.0, 0.0)
    z = ep_balance.expected_max_normal(ep)
    skew = (c.imbalance - 1.0) / z
    return EpSpread(ep, c.imbalance, z, skew * skew, 1.0 - 1.0 / ep)


def busiest_load(s: EpSpread, top_k: int, tokens: float) -> float:
    """Routed rows on the busiest expert-parallel rank over the mean at `tokens` tokens: the popularity skew the
    placement leaves (Context.imbalance, mostly removed by EPLB) and the sampling spread of a small batch, added
    in quadrature at the expected maximum over ep ranks (perf/ep_balance.py); never above all the routed rows
    on one rank."""
    ep = s.ep
    mean_rows = tokens * top_k / ep
    if ep <= 1 or mean_rows <= 0:
        return s.imbalance
    return min(float(ep), 1.0 + s.z * math.sqrt(s.skew_sq + s.sampling / mean_rows))


@dataclass(frozen=True, slots=True)
class FfnShape:
    """What oplist._ffn_ops and router_ops read of a layer kind's FFN under one Context (ffn_shape). Per-row and
    per-token factors multiply the step's rows / tokens as the op builders did; `dense_weights` is 0 without a
    dense part (or shared experts), `moe` False without routed experts. A frozen dataclass of slots, not a
    NamedTuple: the builders read its fields by name (~160 reads a V4.1 prediction), a slot read ~150
    instructions fewer than a NamedTuple field's (its descriptor's call and type check: valgrind)."""

    ranks: int  # tp x dp
    # the dense FFN or the shared experts: a gate_up + down GEMM pair (oplist._ffn_ops)
    dense_weights: float  # parameters per rank (the _gemm's weights)
    dense_source: str  # "dense_dp" (whole on every rank) or "tp"
    dense_op_dtype: str  # opcore.dense_op_dtype
    dense_rows_div: float  # a rank's rows are the step's tokens over this: 1 where every rank runs every token
    dense_flops: float  # 2 x parameters: x tokens / ranks
    dense_weight_bytes: float  # weight bytes per rank
    dense_row_bytes: float  # activation bytes per row of the pair (opcore._act_bytes)
    dense_tile_n: float  # mean output width per rank: gate_up 2 x inter / shards, down hidden (_tile_speed, waves)
    dense_act_n: float  # the activation's intermediate width per rank (opcore.activation_op)
    dense_quants: int  # activation-quant kernels (precision.standalone_quants), when the GEMMs quantise
    # the routed experts (grouped GEMMs)
    moe: bool
    spread: EpSpread
    expert_n: float  # expert parameters / hidden
    expert_flops: float  # 2 x expert parameters: x routed rows
    miss_rates: tuple  # routing._miss_rates: (experts per popularity group, per-group miss chances)
    wave_gemms: tuple  # (output width, source) of the grouped GEMMs that pay tile waves (moe_wave_gemms)
    wave_div: int  # max(ep, 1): the routed rows a rank's waves count are routed x ranks / this
    expert_quants: int  # activation-quant kernels in front of the grouped GEMMs
    # the router (router_ops)
    router_weights: float  # hidden x experts
    router_flops: float  # 2 x router weights: x rows
    router_weight_bytes: float
    router_row_bytes: float  # activation bytes per row (opcore._act_bytes)
    topk_row_bytes: float  # logits read, ids and weights written per row
    # shared experts fused into the routed experts (Context.fused_shared): more experts every token picks, their
    # weights read with the routed experts' (oplist._ffn_ops); the dense part is then empty
    fused_shared: int


def ffn_shape(c: Context, ffn: FfnSpec) -> FfnShape:
    """The FfnShape of `ffn` under `c`, computed once per (Context, FFN spec): remembered by the spec's id, which
    the Context's model keeps alive."""
    hit = c.ffn_shapes.get(id(ffn))
    if hit is not None and hit[0] is ffn:
        return hit[1]
    shape = FfnShape(c.phase.tp * c.phase.dp, *_dense_part(c, ffn), *_moe_part(c, ffn))
    c.ffn_shapes[id(ffn)] = (ffn, shape)
    return shape


def _dense_part(c: Context, ffn: FfnSpec) -> tuple:
    """FfnShape's dense fields: the layout (a dense MLP's, sharding.dense_layout: 'tp' over the TP group, 'dp' whole
    on every rank, 'all' over every rank; the shared experts', sharding.shared_expert_layout: 'tp', 'all' or 'rank',
    whole on every rank on its own tp*dp-th of the rows), the pair's weights and activation bytes, its quantisation
    kernels."""
    if not ffn.params or (ffn.kind == "moe" and c.fused_shared):  # no shared GEMM where they are fused in
        return 0.0, "", "", 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0
    phase, hidden = c.phase, c.model.hidden_size
    if ffn.kind == "moe":
        layout = shared_expert_layout(phase, c.engine, bool(c.dispatch_act_bytes))
    else:
        layout = dense_layout(ffn, phase, c.engine)
    shards = layout_shards(layout, phase)
    rows_div = 1 if layout == "all" else phase.dp * phase.tp if layout == "rank" else phase.dp
    n = ffn.params / shards / hidden
    quants = precision.standalone_quants(c.dense_dtype, c.model.dense_format, 2) if c.dense_quant_bytes else 0
    return (
        ffn.params / shards,
        "dense_dp" if layout == "dp" else "tp",
        dense_op_dtype(c),
        rows_div,
        2 * ffn.params,
        ffn.params * c.dense_bytes / shards,
        _act_bytes(1.0, n, hidden, 2, c.act_in_bytes),
        (2 * n / 3 + hidden) / 2,  # gate_up: 2 x intermediate / shards wide; down (row-parallel): hidden wide
        n / 3,
        quants,
    )


def _moe_part(c: Context, ffn: FfnSpec) -> tuple:
    """FfnShape's routed-expert and router fields."""
    if ffn.kind != "moe":
        return False, ep_spread(c), 0.0, 0.0, (), (), 1, 0, 0.0, 0.0, 0.0, 0.0, 0.0, 0
    hidden, act = c.model.hidden_size, precision.ACTIVATION_BYTES
    quants = precision.standalone_quants(c.expert_dtype, c.model.expert_format, 2) if c.expert_quant_bytes else 0
    weights = hidden * ffn.num_experts
    return (
        True,
        ep_spread(c),
        ffn.expert_params / hidden,
        2 * ffn.expert_params,
        _miss_rates(ffn.num_experts, ffn.experts_per_token, eff.ROUTING_SKEW),  # routing.distinct_experts'
        moe_wave_gemms(c, ffn),
        max(c.phase.ep, 1),
        quants,
        weights,
        2 * weights,
        weights * act,
        _act_bytes(1.0, ffn.num_experts, hidden, 1, act),
        ffn.num_experts * LOGIT_BYTES + ffn.experts_per_token * 8,  # logits in; int32 id + fp32 weight out
        c.fused_shared if ffn.params else 0,
    )


def moe_wave_gemms(c: Context, ffn: FfnSpec) -> tuple[tuple[float, str], ...]:
    """(output width per rank, source) of the routed experts' grouped GEMMs that pay tile-wave fixed time
    (oplist._moe_waves): the ones Context.moe_tile_waves names. Expert TP shards the intermediate: gate / up has
    2 x intermediate / moe_tp outputs per row, down the hidden size."""
    if not c.moe_tile_waves:
        return ()
    moe_tp = c.phase.tp * c.phase.dp / max(c.phase.ep, 1)
    inter = ffn.expert_params / c.model.hidden_size / 3 / moe_tp  # a gated expert's w1, w3, w2
    gemms = (("gate_up", 2 * inter), ("down", c.model.hidden_size))
    return tuple((n, f"moe {name}") for name, n in gemms if name in c.moe_tile_waves)


def router_ops(ops: list, c: Context, s: FfnShape, tokens: float) -> None:
    """Append the router of a MoE layer on each rank's rows: a bf16 GEMM hidden x experts, replicated on every rank
    and never quantised (vLLM GateLinear, a ReplicatedLinear: fused_moe/router/gate_linear.py:26, used by
    models/deepseek_v2.py:321 and qwen3_next.py:199; SGLang MoEGate / ReplicatedLinear: srt/models/deepseek_v2.py
    :497, qwen3_moe.py:290), then the top-k selection over its logits (topk_softmax / grouped_topk: one kernel
    reading the logits and writing the ids and weights). `s`: the FFN's FfnShape."""
    rows = tokens / c.phase.dp
    flops, nbytes = s.router_flops * rows, s.router_weight_bytes + rows * s.router_row_bytes
    ops.append(_gemm("moe router", "bf16", rows, s.router_weights, c.model.hidden_size, flops, nbytes))
    topk = rows * s.topk_row_bytes
    ops.append(_op_new(Op, ("elementwise", "bf16", "any", rows, 0.0, 0.0, 0.0, topk, 1.0, "moe router top-k", 1.0, ())))
