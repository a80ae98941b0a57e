"""What attention DP's gather before the FFN and return after it run on one step, where the engine chooses them per
step (its profile's `dp_gather` rule: SGLang); elsewhere (None) an all-gather of the ranks' rows and a reduce-scatter
back on every step (perf/oplist.py _comm_ops)."""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import lru_cache
from typing import NamedTuple

from autotune.capability.engine_profile import DpStep
from autotune.capability.profiles import profile
from autotune.perf import precision
from autotune.perf.opcore import Context, StepInput, _collective, attention_rows, rank_prompt_tokens
from autotune.perf.sharding import dp_prefill_apart
from autotune.perf.topology import topology, transport


class DpGather(NamedTuple):
    """The collectives of one step's gather and return (oplist._comm_ops), over the stage's ranks."""

    gather: str  # "allgather" (every rank's rows padded to the longest) or "allreduce" (a zeroed buffer of all rows)
    combine: str  # "reducescatter" or "allreduce" (then each rank copies its slice)
    rows: float  # rows of the gathered buffer, every rank's (padding included)


def _facts(c: Context) -> tuple | None:
    """The step-independent part, once per Context (its memo_keys' "dp_gather"): None where the engine has no rule
    or there is no attention DP, else (rule, transport of the stage, DEP layout, a2a backend, prompts apart)."""
    facts = c.memo_keys.get("dp_gather", False)
    if facts is False:
        phase, rule = c.phase, profile(c.engine).dp_gather
        facts = None
        if rule is not None and phase.dp > 1:
            a2a = phase.comm.all2all != "allgather_reducescatter"
            # DEP: attention TP 1, the experts over exactly the DP ranks, rows not quantised for a FlashInfer
            # all-gather of their own (sharding.dispatch_act_bytes)
            dep = phase.tp == 1 and phase.ep == phase.dp and not a2a and not c.dispatch_act_bytes
            link = transport(topology(c.hw), c.stage)
            facts = (rule, link, dep, a2a, dp_prefill_apart(phase, c.engine))
        c.memo_keys["dp_gather"] = facts
    return facts


@lru_cache(maxsize=256)
def _bucket(rows: float, graph_rank_tokens: float, sizes: Callable[[int], tuple[int, ...]] | None) -> int:
    """The smallest prompt-graph capture size (the profile's `prefill_graph_sizes`) that holds `rows` on a rank (0:
    none does, or the engine buckets no prompt graph: the step runs eager)."""
    need = -int(-rows // 1)
    return next((s for s in sizes(int(graph_rank_tokens)) if s >= need), 0) if sizes else 0


def dp_gather(c: Context, x: StepInput, prompt: bool, caps: tuple[float, float]) -> DpGather | None:
    """The gather and return of a step whose layer input is `x` (`prompt`: the step carries prompt tokens, on this
    layer or not), `caps`: the instance's CUDA-graph caps (efficiency.graph_caps: decode sequences, prompt-carrying
    step tokens; per rank x dp). None: the default pair over the step's rows (oplist._comm_ops)."""
    facts = _facts(c)
    if facts is None:
        return None
    rule, link, dep, a2a, apart = facts
    dp = c.phase.dp
    decode_rows = x.decode_seqs * x.decode_width
    rows = decode_rows + x.prefill_tokens
    if rows <= 0:
        return None
    verify = x.decode_width > 1 and x.decode_seqs > 0
    # the busiest rank's rows: a prompt rank apart from its decodes (sharding.dp_prefill_apart) or both together
    longest = max(rank_prompt_tokens(x, dp), decode_rows / dp) if apart and prompt else attention_rows(x, dp)
    graph_tokens = caps[1]
    sizes = profile(c.engine).prefill_graph_sizes
    bucket = _bucket(longest, graph_tokens / dp, sizes) if prompt and 0 < graph_tokens < math.inf else 0
    idle = not prompt and decode_rows < dp
    step = DpStep(
        prompt=prompt,
        verify=verify,
        graph=bucket > 0 if prompt else x.decode_seqs <= caps[0],  # ops._step's decode-graph rule
        dep=dep,
        a2a=a2a,
        idle=idle,
        sparse=idle and 2 * rows < dp,
        link=link,
        world=len(c.stage),
        sum_bytes=rows * c.model.hidden_size * precision.ACTIVATION_BYTES,
        family=c.model.family,
        two_batch=c.phase.overlap.two_batch,
    )
    gather, combine = rule(step)
    if gather == "allgather" and combine == "reducescatter" and not bucket:
        return None  # the default pair over the step's rows
    return DpGather(gather, combine, float(dp * bucket if gather == "allgather" and bucket else rows))


def dp_pair(ops: list, stage: tuple, tokens: float, gathered: float, row_bytes: float, gather: DpGather | None) -> None:
    """Attention DP's gather (`gathered` bytes a row) and return (`row_bytes` a row) over the stage: `gather`'s
    collectives over its buffer's rows, else an all-gather and a reduce-scatter of the step's `tokens` rows."""
    if gather is None:
        ops.append(_collective("allgather", stage, tokens * gathered, "dp"))
        ops.append(_collective("reducescatter", stage, tokens * row_bytes, "dp"))
        return
    ops.append(_collective(gather.gather, stage, gather.rows * gathered, "dp"))
    ops.append(_collective(gather.combine, stage, gather.rows * row_bytes, "dp"))
