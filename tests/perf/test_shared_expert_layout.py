"""A MoE layer's shared experts, run apart from the routed experts, follow one rule for the op list and the weights
(sharding.shared_expert_layout): SGLang under DP attention builds them over its full TP group, tp*dp ranks, and runs
them on the gathered rows (srt/models/deepseek_v2.py:866-896 parallel_group "tp"; forward_normal on the global DP
buffer), whole on every rank on its own rows with DeepEP or the FP4 all-gather dispatch; vLLM over the attention TP
group, whole on every rank on its tp-slice of the rows under sequence-parallel MoE (config/parallel.py:859-877)."""

import dataclasses

import pytest

from autotune.catalog import load_model, load_preset
from autotune.perf import memory, precision
from autotune.perf.ffn_shape import ffn_shape
from autotune.perf.opcore import context
from autotune.perf.oplist import ffn_kernel_ops
from autotune.perf.sharding import shared_expert_layout
from autotune.specs import DTYPE_BYTES, Comm, Kernels, PhasePlan
from tests.perf.boxes import b200_box

H200 = load_preset("h200-x8")
DSV3 = load_model("deepseek-v3")
LAYER = DSV3.layers[-1]
MOE = LAYER.ffn
GPUS = tuple(range(8))
DEP8 = PhasePlan(gpus=GPUS, tp=1, dp=8, ep=8, dp_attention=True)  # EP 8: SGLang does not fuse the shared expert
DEEPEP = dataclasses.replace(DEP8, comm=Comm(all2all="deepep"))
TP2_DP4_DEEPEP = dataclasses.replace(DEEPEP, tp=2, dp=4)
TP2_DP4_EP8 = dataclasses.replace(DEP8, tp=2, dp=4)
TP8_EP8 = PhasePlan(gpus=GPUS, tp=8, ep=8)
TOKENS = 512.0


def _shared_gemm(engine, phase, tokens=TOKENS):
    """The shared experts' GEMM pair: the first GEMM of the MoE layer's op list."""
    c = context(DSV3, phase, engine, H200, phase.gpus)
    assert not c.fused_shared
    return next(op for op in ffn_kernel_ops(c, MOE, tokens) if op.kind == "gemm"), c


def test_the_rule_follows_the_engines():
    assert shared_expert_layout(DEP8, "sglang") == "all"
    assert shared_expert_layout(TP2_DP4_EP8, "sglang") == "all"
    assert shared_expert_layout(DEEPEP, "sglang") == "rank"
    assert shared_expert_layout(DEP8, "sglang", replicated_dispatch=True) == "rank"  # FP4 all-gather dispatch
    assert shared_expert_layout(TP8_EP8, "sglang") == "tp"  # no DP attention
    assert shared_expert_layout(DEP8, "vllm") == "tp"  # vLLM's DP ranks are separate engines: tp = 1
    assert shared_expert_layout(TP2_DP4_EP8, "vllm") == "rank"  # sequence-parallel MoE
    assert shared_expert_layout(dataclasses.replace(TP2_DP4_EP8, ep=1), "vllm") == "tp"


@pytest.mark.parametrize(
    ("engine", "phase", "shards", "rows_div"),
    [
        ("sglang", DEP8, 8, 1),  # over the 8 ranks, on the gathered rows
        ("sglang", TP2_DP4_EP8, 8, 1),
        ("sglang", DEEPEP, 1, 8),  # whole, on the rank's own rows
        ("sglang", TP2_DP4_DEEPEP, 1, 8),  # and on its attention-TP slice of them
        ("sglang", TP8_EP8, 8, 1),
        ("vllm", DEP8, 1, 8),
        ("vllm", TP2_DP4_EP8, 1, 8),  # sequence-parallel MoE
        ("vllm", TP8_EP8, 8, 1),
    ],
)
def test_the_shared_gemm_runs_the_layouts_rows_on_its_shard(engine, phase, shards, rows_div):
    op, c = _shared_gemm(engine, phase)
    assert op.m == pytest.approx(TOKENS / rows_div)
    weight_bytes = MOE.params * c.dense_bytes / shards
    assert op.nbytes == pytest.approx(weight_bytes + op.m * ffn_shape(c, MOE).dense_row_bytes)
    assert op.flops == pytest.approx(2 * MOE.params * TOKENS / 8)  # the same work in every layout


def test_sglang_dep8_reads_an_eighth_of_the_shared_weights():
    """The brief's case: DeepSeek-R1 at DEP8 on H200 read the whole shared expert on every rank (44 MB a layer)."""
    op, c = _shared_gemm("sglang", DEP8, tokens=8.0)
    assert op.nbytes < MOE.params * c.dense_bytes / 4


@pytest.mark.parametrize("engine", ["sglang", "vllm"])
@pytest.mark.parametrize("phase", [DEP8, DEEPEP, TP2_DP4_DEEPEP, TP2_DP4_EP8, TP8_EP8])
def test_memorys_shared_bytes_are_the_ops(engine, phase):
    """memory._layer_bytes' shared-expert bytes (the layer's with its shared experts less without) are the op's."""
    c = context(DSV3, phase, engine, H200, phase.gpus)
    dense_b = DTYPE_BYTES[precision.dense_dtype(DSV3, phase)]
    expert_b = DTYPE_BYTES[precision.expert_dtype(DSV3, phase)]
    no_shared = dataclasses.replace(LAYER, ffn=dataclasses.replace(MOE, params=0))
    held = memory._layer_bytes(LAYER, phase, engine, dense_b, expert_b)
    held -= memory._layer_bytes(no_shared, phase, engine, dense_b, expert_b)
    assert ffn_shape(c, MOE).dense_weight_bytes == pytest.approx(held)


def test_the_fp4_all_gather_dispatch_keeps_the_shared_expert_whole():
    """SGLang's NVFP4 FlashInfer-CUTLASS MoE with EP over the DP ranks gathers FP4 rows and replicates the shared
    expert (srt/layers/moe/utils.py:707-718, deepseek_v2.py:875-896): whole on each rank, on its own rows."""
    b200 = b200_box()
    glm = load_model("glm-5")
    nvfp4 = dataclasses.replace(glm, expert_dtype="fp4", expert_format="nvfp4")
    phase = dataclasses.replace(DEP8, kernels=Kernels(moe="flashinfer_cutlass"))
    c = context(nvfp4, phase, "sglang", b200, phase.gpus)
    assert c.dispatch_act_bytes
    ffn = next(layer.ffn for layer in nvfp4.layers if layer.ffn.kind == "moe")
    s = ffn_shape(c, ffn)
    assert s.dense_rows_div == 8
    assert s.dense_weight_bytes == pytest.approx(ffn.params * c.dense_bytes)
    # memory reads the same rule where it is given the box: the weights per GPU grow by the 7 / 8 of the shared
    # experts the ranks no longer split, in every MoE layer
    with_box, without = (
        memory.weights_per_gpu_bytes(nvfp4, phase, "sglang", b200),
        memory.weights_per_gpu_bytes(nvfp4, phase, "sglang"),
    )
    moe_layers = sum(layer.ffn.kind == "moe" for layer in nvfp4.layers)
    assert with_box - without == pytest.approx(moe_layers * ffn.params * c.dense_bytes * 7 / 8)


def test_the_pairs_tile_width_keeps_down_projections_hidden_output():
    """The gate_up + down pair is priced at its mean output width per rank: gate_up's 2 x intermediate / shards
    (column-parallel) and down's hidden size (row-parallel: its K is sharded, not its output), so 512 gathered rows
    over an eighth of the shared expert fill the SMs (down's 4 x 56 tiles of 128 x 128) rather than the 12 tiles an
    output width of 1.5 x intermediate / 8 gave."""
    op, c = _shared_gemm("sglang", DEP8)
    inter = MOE.params / DSV3.hidden_size / 3
    assert ffn_shape(c, MOE).dense_tile_n == pytest.approx((2 * inter / 8 + DSV3.hidden_size) / 2)
    assert op.speed > 0.5
