"""SGLang's attention-DP gather before the FFN and return after it, by step (capability/profiles/sglang_0_5_23.py
dp_gather, perf/dp_gather.py): a prompt-carrying step that replays the breakable prefill graph all-gathers every rank's
rows padded to the graph bucket of the longest rank (MAX_LEN); an eager prompt-carrying step or a verify step
all-reduces a buffer of all ranks' rows (SUM_LEN); a decode-only step does too while the custom all-reduce holds
that buffer. The return is a reduce-scatter(v) under DEP or on a MAX_LEN batch, else an all-reduce of the buffer.
vLLM keeps one all-gather and one reduce-scatter of the step's rows."""

import pytest

from autotune.capability.engine_profile import DpStep
from autotune.capability.profiles.sglang_0_5_23 import V2_MAX_BYTES, dp_gather
from autotune.catalog import load_model, load_preset
from autotune.perf import efficiency as eff
from autotune.perf.dp_gather import dp_gather as step_gather
from autotune.perf.lm_head import head_ops
from autotune.perf.opcore import StepInput, context
from autotune.perf.oplist import ffn_comm_ops
from autotune.perf.ops import step_fn
from autotune.specs import Comm, PhasePlan, Speculative

H200 = load_preset("h200-x8")
DSV3 = load_model("deepseek-v3")
ROW = DSV3.hidden_size * 2  # a bf16 hidden row
PROMPT = StepInput(56, 2000.0, 1024, 0.0, 1.0, 1024)  # one rank prefills 1024 tokens beside 56 decodes elsewhere
DECODE = StepInput(64, 2000.0)


def _phase(tp=1, dp=8, ep=8, **kw) -> PhasePlan:
    return PhasePlan(gpus=tuple(range(8)), tp=tp, dp=dp, ep=ep, dp_attention=True, **kw)


def _dp_ops(engine: str, phase: PhasePlan, x: StepInput, caps: tuple | None = None) -> list:
    """The DP collectives (source "dp") of the MoE layer's FFN half for step `x`, as the step prices them."""
    c = context(DSV3, phase, engine, H200, phase.gpus)
    caps = caps or eff.graph_caps(DSV3, phase, engine, H200, 1)
    gather = step_gather(c, x, bool(x.prefill_tokens), caps)
    tokens = x.decode_seqs * x.decode_width + x.prefill_tokens
    return [(op.bucket, op.nbytes) for op in ffn_comm_ops(c, DSV3.layers[-1].ffn, tokens, gather) if op.source == "dp"]


def test_a_graphed_prompt_step_all_gathers_every_rank_padded_to_the_longest_ranks_bucket():
    ops = _dp_ops("sglang", _phase(), PROMPT)
    padded = 8 * 1024 * ROW  # the prompt rank's 1024 rows are the longest: every rank sends a 1024-row block
    assert ops == [("allgather", pytest.approx(padded)), ("reducescatter", pytest.approx(padded))]
    assert padded > 5 * (56 + 1024) * ROW  # the old model moved the step's rows only


def test_an_eager_prompt_step_all_reduces_the_summed_buffer():
    rows = (56 + 1024) * ROW
    eager = (2048, 0)  # no prompt-carrying CUDA graph (pp > 1, two-batch overlap, DeepSeek-V4)
    assert _dp_ops("sglang", _phase(), PROMPT, eager) == [("allreduce", rows), ("reducescatter", rows)]  # DEP: rsv
    # experts tensor-sharded (ep 1) or attention TP 2: no reduce_scatterv, the FFN output is all-reduced
    assert _dp_ops("sglang", _phase(ep=1), PROMPT, eager) == [("allreduce", rows), ("allreduce", rows)]
    assert _dp_ops("sglang", _phase(tp=2, dp=4), PROMPT, eager) == [("allreduce", rows), ("allreduce", rows)]


def test_a_decode_step_all_reduces_while_the_custom_all_reduce_holds_the_buffer():
    rows = 64 * ROW
    assert _dp_ops("sglang", _phase(), DECODE) == [("allreduce", rows), ("reducescatter", rows)]
    big = StepInput(2048, 2000.0)  # 2048 x 14 KiB = 28 MiB: past the v2 workspace, MAX_LEN as before
    assert 2048 * ROW > V2_MAX_BYTES
    assert _dp_ops("sglang", _phase(), big) == [("allgather", 2048 * ROW), ("reducescatter", 2048 * ROW)]


def test_speculative_verify_steps_keep_their_graphs_max_len_and_sum_len_eagerly():
    spec = _phase(speculative=Speculative(method="mtp", draft_tokens=1))
    verify = StepInput(64, 2000.0, decode_width=2.0)
    # in the decode graph: captured MAX_LEN under speculative decoding, the default pair
    assert _dp_ops("sglang", spec, verify) == [("allgather", 128 * ROW), ("reducescatter", 128 * ROW)]
    eager = (0, 0)  # no graph: a verify batch counts as extend, SUM_LEN
    assert _dp_ops("sglang", spec, verify, eager) == [("allreduce", 128 * ROW), ("reducescatter", 128 * ROW)]
    # a dense layer of a DeepEP plan keeps the gather: no custom-all-reduce SUM_LEN with an a2a backend
    deepep = _phase(comm=Comm(all2all="deepep"))
    c = context(DSV3, deepep, "sglang", H200, deepep.gpus)
    assert step_gather(c, DECODE, False, eff.graph_caps(DSV3, deepep, "sglang", H200, 1)) is None


def test_vllm_keeps_the_all_gather_and_reduce_scatter_of_the_steps_rows():
    for x in (PROMPT, DECODE):
        rows = (x.decode_seqs + x.prefill_tokens) * ROW
        assert _dp_ops("vllm", _phase(), x) == [("allgather", rows), ("reducescatter", rows)]


def test_the_padded_gather_makes_sglangs_dp_prompt_step_slower():
    phase = _phase()
    sglang = step_fn(DSV3, phase, "sglang", H200, phase.gpus, "p")(PROMPT)
    vllm = step_fn(DSV3, phase, "vllm", H200, phase.gpus, "p")(PROMPT)
    assert sglang.comm_ms["allgather"] > 4 * vllm.comm_ms["allgather"]  # 8 x 1024 rows against 1080
    assert sglang.step_ms > 1.2 * vllm.step_ms


def test_the_rule_reads_the_step():
    base = DpStep(
        prompt=False,
        verify=False,
        graph=False,
        dep=True,
        a2a=False,
        idle=False,
        sparse=False,
        link="nvlink",
        world=8,
        sum_bytes=1e6,
        family="deepseek_v3",
        two_batch=False,
    )
    assert dp_gather(base) == ("allreduce", "reducescatter")
    assert dp_gather(base._replace(dep=False)) == ("allreduce", "allreduce")
    assert dp_gather(base._replace(sum_bytes=2 * V2_MAX_BYTES)) == ("allgather", "reducescatter")
    assert dp_gather(base._replace(link="p2p")) == ("allgather", "reducescatter")  # legacy kernel: not v2
    assert dp_gather(base._replace(idle=True)) == ("allgather", "reducescatter")
    assert dp_gather(base._replace(idle=True, sparse=True, dep=False)) == ("allreduce", "allreduce")
    assert dp_gather(base._replace(prompt=True, graph=True, dep=False)) == ("allgather", "reducescatter")
    assert dp_gather(base._replace(prompt=True, dep=False)) == ("allreduce", "allreduce")
    assert dp_gather(base._replace(prompt=True, graph=True, verify=True)) == ("allreduce", "reducescatter")
    assert dp_gather(base._replace(verify=True)) == ("allreduce", "reducescatter")  # eager verify: SUM_LEN
    assert dp_gather(base._replace(verify=True, graph=True)) == ("allgather", "reducescatter")  # its graph's MAX_LEN
    assert dp_gather(base._replace(graph=True, idle=True)) == ("allreduce", "reducescatter")  # captured SUM_LEN
    assert dp_gather(base._replace(graph=True, a2a=True, dep=False)) == ("allgather", "reducescatter")


def test_the_return_by_model_family():
    step = DpStep(True, False, True, True, False, False, False, "nvlink", 8, 1e6, "deepseek_v41", False)
    assert dp_gather(step) == ("allgather", "reducescatter")  # DEP: reduce_scatterv
    # V4's MoE transport all-reduces off DEP, on a MAX_LEN batch too, and reduce-scatters under two-batch overlap
    assert dp_gather(step._replace(dep=False)) == ("allgather", "allreduce")
    assert dp_gather(step._replace(dep=False, two_batch=True)) == ("allgather", "reducescatter")
    assert dp_gather(step._replace(dep=False, family="deepseek_v3")) == ("allgather", "reducescatter")
    assert dp_gather(step._replace(family="qwen3")) == ("allgather", "allreduce")  # the "ar" boundary


def test_v41_on_pcie_prices_an_all_reduce_gather_and_return_on_its_eager_prompt_steps():
    v41, box = load_model("deepseek-v4.1-flash"), load_preset("rtx-pro-6000-x8")
    phase = PhasePlan(gpus=tuple(range(4)), tp=1, dp=4, ep=1, dp_attention=True)
    c = context(v41, phase, "sglang", box, phase.gpus)
    caps = eff.graph_caps(v41, phase, "sglang", box, 1)
    assert caps[1] == 0  # no breakable prefill graph for V4.x
    x = StepInput(24, 2000.0, 1024, 0.0, 1.0, 1024)
    gather = step_gather(c, x, True, caps)
    assert (gather.gather, gather.combine, gather.rows) == ("allreduce", "allreduce", 1048.0)


def test_a_v41_decode_step_off_nvlink_all_gathers_its_rows_and_all_reduces_them_back():
    v41, box = load_model("deepseek-v4.1-flash"), load_preset("rtx-pro-6000-x8")  # PCIe: no custom all-reduce v2
    phase = PhasePlan(gpus=tuple(range(4)), tp=2, dp=2, ep=4, dp_attention=True)
    c = context(v41, phase, "sglang", box, phase.gpus)
    gather = step_gather(c, StepInput(512, 2000.0), False, eff.graph_caps(v41, phase, "sglang", box, 1))
    assert gather == ("allgather", "allreduce", 512.0)  # MAX_LEN over the step's rows; V4's MoE transport off DEP
    rows = 512 * v41.hidden_size * 2
    ops = [(op.bucket, op.nbytes) for op in ffn_comm_ops(c, v41.layers[-1].ffn, 512.0, gather) if op.source == "dp"]
    assert ops == [("allgather", rows), ("allreduce", rows)]


def test_the_head_over_the_dp_ranks_all_reduces_its_rows_hidden_states():
    phase = _phase()  # no --enable-dp-lm-head: the head is vocab-parallel over all tp x dp ranks
    c = context(DSV3, phase, "sglang", H200, phase.gpus)
    ops = [(op.bucket, op.nbytes) for op in head_ops(c, 64.0) if op.source == "dp_lm_head" and op.kind == "collective"]
    assert ops == [("allreduce", 64 * ROW), ("allgather", 64 * DSV3.vocab_size * 2)]
    head = _phase(dp_lm_head=True)  # vocab-parallel over attention TP (1 here): no DP collective
    c = context(DSV3, head, "sglang", H200, head.gpus)
    assert not [op for op in head_ops(c, 64.0) if op.kind == "collective"]
