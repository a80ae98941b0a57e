"""The FLA Triton Gated DeltaNet chain walks each prompt's 64-token chunks in order (one state-pass program per
(prompt, value head, d_v slice): vLLM third_party/flash_linear_attention/ops/chunk_delta_h.py:142,320-321), so a
few long prompts take (chunks of a prompt) x (one chunk step), above the throughput time
(perf/linear_attention.py chain_walk_s). The step input carries the prompt count (StepInput.prefill_seqs), set by
the steady-state screen (perf/serving.py _input) and the simulator (sim/step_cache.py StepCache)."""

from __future__ import annotations

import math

from autotune.catalog import load_model, load_preset
from autotune.perf import costing, linear_attention, oplist, serving
from autotune.perf.opcore import StepInput, context
from autotune.perf.ops import step_fn
from autotune.sim.engine import StepCache
from autotune.specs import Batching, PhasePlan, Workload

MODEL = "qwen3.5-397b-a17b"
TOKENS = 65536.0


def _phase(chunk: int) -> PhasePlan:
    return PhasePlan(gpus=tuple(range(8)), tp=8, batching=Batching(chunked_prefill_tokens=chunk))


def _scan(engine: str, x: StepInput, chunk: int = 65536, preset: str = "h200-x8"):
    """(the GDN scan op alone, its seconds): the chain for SGLang on sm_90 past its 32,768-token FlashInfer limit."""
    m = load_model(MODEL)
    phase = _phase(chunk)
    c = context(m, phase, engine, load_preset(preset), phase.gpus)
    att = next(layer.attention for layer in m.layers if layer.attention.kind == "gdn")
    (op,) = [op for op in oplist.attention_ops(c, att, x) if op.source == "linear attention (gdn)"]
    return op, costing.cost_ops(c, [op]).time_s, c


def _scan_s(engine: str, x: StepInput) -> float:
    return _scan(engine, x)[1]


def _without_states_s(engine: str, x: StepInput) -> float:
    """The scan's seconds at `x` with the bytes of the step's unknown count (no prompts' states)."""
    op, _, c = _scan(engine, x)
    unknown, _, _ = _scan(engine, x._replace(prefill_seqs=0.0))
    return costing.cost_ops(c, [op._replace(nbytes=unknown.nbytes)]).time_s


def test_one_long_prompt_takes_the_chain_s_chunk_walk():
    alone = _scan_s("sglang", StepInput(prefill_tokens=TOKENS, prefill_seqs=1.0))
    throughput = _scan_s("sglang", StepInput(prefill_tokens=TOKENS))  # no prompt count: the throughput time
    walk_s = TOKENS / linear_attention.CHUNK * linear_attention.CHAIN_WALK_STEP_US * 1e-6  # 8 heads: one wave
    assert alone > throughput * 1.05
    assert walk_s <= alone <= walk_s * 1.05  # the walk and the chain's launch floors


def test_many_prompts_keep_the_throughput_time():
    many = StepInput(prefill_tokens=TOKENS, prefill_seqs=64.0)  # 64 x 1,024 tokens: 16 chunks a prompt
    # the walk (16 waves of 16 chunks) stays below the throughput time; only the prompts' states add
    assert _without_states_s("sglang", many) == _scan_s("sglang", StepInput(prefill_tokens=TOKENS))


def test_each_prompt_s_state_is_read_and_written_once():
    m = load_model(MODEL)
    att = next(layer.attention for layer in m.layers if layer.attention.kind == "gdn")
    for engine in ("sglang", "vllm"):  # the chain and FlashInfer's kernel
        many = _scan(engine, StepInput(prefill_tokens=TOKENS, prefill_seqs=64.0))[0]
        unknown = _scan(engine, StepInput(prefill_tokens=TOKENS))[0]
        state = 64 * 2 * att.state_elems_per_seq / 8 * 4  # fp32 states of one TP8 rank
        assert math.isclose(many.nbytes - unknown.nbytes, state, rel_tol=1e-9) and m.state_dtype == "fp32"


def test_flashinfer_s_kernel_takes_no_walk():
    # vLLM on sm_90 runs FlashInfer's kernel (use_cp "auto": its context-parallel route for a few prompts)
    one = StepInput(prefill_tokens=TOKENS, prefill_seqs=1.0)
    assert _without_states_s("vllm", one) == _scan_s("vllm", StepInput(prefill_tokens=TOKENS))


def test_a_model_without_gdn_reads_no_prompt_count():
    assert linear_attention.reads_prompt_count(load_model(MODEL))
    assert not linear_attention.reads_prompt_count(load_model("llama-3.1-70b"))


def test_the_steady_state_screen_counts_the_step_s_prompts():
    x = serving._input(serving.NO_DP, 4.0, 1000.0, 8192.0, 2048.0, 2048.0, pp=2)
    assert x.prefill_seqs == 2.0  # four pieces of 2,048 tokens over two micro-batches
    assert serving._prefill_input(8192.0, 4096.0).prefill_seqs == 1.0  # a lone prompt
    assert serving._input(serving.NO_DP, 4.0, 1000.0, 0.0, 0.0, 1.0).prefill_seqs == 0.0


def test_a_single_long_prompt_s_ttft_grows_on_the_chain():
    """The steady-state screen's lone prompt (aggregated_point at one sequence): its prompt steps carry one prompt."""
    m, hw = load_model(MODEL), load_preset("h200-x8")
    phase = _phase(65536)
    step = step_fn(m, phase, "sglang", hw, phase.gpus, "mixed")
    w = Workload(isl=int(TOKENS), osl=16)
    point = serving.aggregated_point(step, 1, 1, w, 65536, 1)
    unknown = step(StepInput(prefill_tokens=TOKENS, prefill_ctx=TOKENS / 2)).step_ms
    assert point.ttft_ms > unknown


class _Recorder:
    def __init__(self):
        self.seen: list[StepInput] = []

    def __call__(self, x: StepInput):
        self.seen.append(x)
        return type("S", (), {"step_ms": 1.0 + x.prefill_seqs})()


def test_the_simulator_s_step_cache_passes_and_keys_the_prompt_count():
    rec = _Recorder()
    cache = StepCache(rec, pp=2, dp=1, prompts_matter=True)
    one, three = cache.ms(0, 0, 8192, 4096, 0.0, 1), cache.ms(0, 0, 8192, 4096, 0.0, 3)
    assert one != three  # keyed apart
    assert {x.prefill_seqs for x in rec.seen} == {0.5, 1.5}  # per micro-batch
    plain = _Recorder()
    blind = StepCache(plain, pp=1, dp=1)  # a model whose step does not read the count
    assert blind.ms(0, 0, 8192, 4096, 0.0, 1) == blind.ms(0, 0, 8192, 4096, 0.0, 3)
    assert all(x.prefill_seqs == 0.0 for x in plain.seen)
    assert math.isclose(one, 1.5)
