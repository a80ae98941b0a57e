"""The simulator's step costs (sim/engine.py): StepCache looks a step's time up on a grid of counts and contexts
and interpolates perf's step function (ops.step_fn) in between, so a run evaluates tens of steps, not hundreds."""

from __future__ import annotations

import math
from collections.abc import Callable

from autotune.perf.ops import StepInput
from autotune.specs import StepBreakdown

EXACT_BELOW = 32  # batch sizes and token counts up to this are looked up exactly; above, on a 2^(1/8) grid
TOKEN_GRID = 8  # lookup buckets per doubling of a token/sequence count (representative within +-4.4%)
CTX_GRID = 4  # buckets per doubling of an attention context (+-9%)
COST_EXACT_BELOW = 16  # step costs are evaluated at whole counts up to this, above on a 2^(1/2) grid ...
COST_GRID = 2  # ... and interpolated linearly in the decoding sequences and the prompt tokens in between
SHARE_GRID = 32  # the busiest DP rank's share of a step's prompt tokens, looked up in steps of 1/32


def _bucket(x: float) -> float:
    return float(round(x)) if x <= EXACT_BELOW else 2.0 ** (round(TOKEN_GRID * math.log2(x)) / TOKEN_GRID)


def _ctx_bucket(x: float) -> float:
    return 2.0 ** (round(CTX_GRID * math.log2(x)) / CTX_GRID) if x > 1 else 1.0


def _bracket(x: float) -> tuple[float, float, float]:
    """(grid point below, grid point above, weight of the one above) of a count on the cost grid."""
    if x <= COST_EXACT_BELOW:
        lo = float(math.floor(x))
        return lo, lo + 1.0, x - lo
    k = math.floor(COST_GRID * math.log2(x))
    lo, hi = 2.0 ** (k / COST_GRID), 2.0 ** ((k + 1) / COST_GRID)
    return lo, hi, (x - lo) / (hi - lo)


class StepCache:
    """Step time (ms) of one instance by (decoding sequences, decode context, prompt tokens, prompt context, the
    busiest attention-DP rank's share of the prompt tokens): counts rounded to a lookup bucket, contexts to
    theirs, the share to 1/SHARE_GRID; the step itself is perf's (`step` = ops.step_fn of the phase), evaluated on
    a coarser grid of counts (`grid`) and interpolated bilinearly in between (step time is smooth in both counts),
    so a run evaluates tens of steps, not hundreds. `dp`: the phase's attention-DP ranks (a share of 1 / dp or
    less is the even spread, StepInput's default). `prompts_matter`: the step time reads the count of prompts
    (StepInput.prefill_seqs: linear_attention.reads_prompt_count), which then joins the key, exactly; else it is
    left out of the key and the step input."""

    def __init__(self, step: Callable[[StepInput], StepBreakdown], pp: int, dp: int = 1, prompts_matter=False):
        self.step, self.pp, self.dp, self.memo, self.grid = step, pp, dp, {}, {}
        self.prompts_matter = prompts_matter

    def ms(
        self,
        decode_seqs: float,
        decode_ctx: float,
        prefill_tokens: float,
        prefill_ctx: float,
        busiest: float = 0.0,
        prompts: int = 0,
    ) -> float:
        """The step's time; `busiest`: the prompt tokens of the busiest attention-DP rank (0: the even spread);
        `prompts`: the prompts whose tokens the step runs."""
        share = 0.0
        if busiest and self.dp > 1 and prefill_tokens and busiest * self.dp > prefill_tokens * (1 + 1e-9):
            share = min(1.0, math.ceil(SHARE_GRID * busiest / prefill_tokens - 1e-9) / SHARE_GRID)
        key = (
            _bucket(decode_seqs) if decode_seqs else 0.0,
            _ctx_bucket(decode_ctx) if decode_seqs else 0.0,
            _bucket(prefill_tokens) if prefill_tokens else 0.0,
            _ctx_bucket(prefill_ctx) if prefill_tokens else 0.0,
            share,
            prompts if prefill_tokens and self.prompts_matter else 0,
        )
        hit = self.memo.get(key)
        if hit is None:
            hit = self.memo[key] = self._interpolated(*key)
        return hit

    def _interpolated(self, d: float, dctx: float, p: float, pctx: float, share: float, n: int = 0) -> float:
        d_lo, d_hi, wd = _bracket(d) if d else (0.0, 0.0, 0.0)
        p_lo, p_hi, wp = _bracket(p) if p else (0.0, 0.0, 0.0)
        at = self._at
        low = (1 - wp) * at(d_lo, dctx, p_lo, pctx, share, n) + (
            wp * at(d_lo, dctx, p_hi, pctx, share, n) if wp else 0.0
        )
        if not wd:
            return low
        high = (1 - wp) * at(d_hi, dctx, p_lo, pctx, share, n) + (
            wp * at(d_hi, dctx, p_hi, pctx, share, n) if wp else 0.0
        )
        return (1 - wd) * low + wd * high

    def _at(self, d: float, dctx: float, p: float, pctx: float, share: float = 0.0, n: int = 0) -> float:
        key = (d, dctx, p, pctx, share, n)
        hit = self.grid.get(key)
        if hit is None:
            pp = self.pp
            rank = max(share * p, 1.0) / pp if share and p else 0.0  # opcore.rank_prompt_tokens
            x = StepInput(d / pp, dctx if d else 0.0, p / pp, pctx if p else 0.0, 1.0, rank, n / pp if p else 0.0)
            hit = self.grid[key] = self.step(x).step_ms
        return hit
