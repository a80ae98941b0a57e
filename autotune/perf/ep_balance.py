"""Load of the busiest expert-parallel rank over the mean: the expected maximum of the ranks' routed-row counts.

Each of `ep` ranks holds n = E/ep of the E routed experts. A rank's share of a step's routed rows varies for two
independent reasons: (1) which experts it holds (expert popularity differs; a rank's popularity is the mean of n
draws from the experts' popularity distribution, coefficient of variation EXPERT_LOAD_CV / sqrt(n) with the
finite-population factor (E - n)/(E - 1)); (2) the sampling of a finite batch (a multinomial count with mean m =
tokens x top_k / ep rows, relative variance (1 - 1/ep) / m). The busiest rank sits at the expected maximum of ep
such normal deviations: 1 + z(ep) x sqrt(cv_skew^2 + cv_sampling^2), z(ep) from Blom's approximation.
EPLB keeps EPLB_RESIDUAL_IMBALANCE of the skew term; it cannot remove the sampling spread.

The popularity CV depends on the traffic (TensorRT-LLM's wide-EP blog, DeepSeek-R1 EP32: "the EP imbalance issue
is dataset sensitive", the hot layer and experts differ between a machine-translation set and GSM8K): a workload
gives its own as Workload.expert_load_cv (--expert-load-cv; `measure` reads it from the engine's expert counts,
measure/expert_load.py), else the model takes EXPERT_LOAD_CV (expert_load_cv). It is decided once per Context.
"""

from __future__ import annotations

import math
from functools import lru_cache
from statistics import NormalDist

from autotune.perf import efficiency as eff


@lru_cache(maxsize=256)
def expected_max_normal(n: int) -> float:
    """E[max of n independent standard normals]: Blom's approximation inv_cdf((n - 0.375) / (n + 0.25))
    (G. Blom, Statistical Estimates and Transformed Beta-Variables, 1958); within 5% of the exact value at n = 2
    (0.589 vs 0.564) and 0.2% at n = 32 (2.067 vs 2.070). 0 for a single rank."""
    if n <= 1:
        return 0.0
    return NormalDist().inv_cdf((n - 0.375) / (n + 0.25))


def expert_load_cv(override: float = 0.0) -> float:
    """The experts' popularity CV a prediction uses: the workload's (Workload.expert_load_cv; 0 = none), else
    efficiency.EXPERT_LOAD_CV."""
    return override if override > 0 else eff.EXPERT_LOAD_CV


def _rank_share(ep: int, num_experts: int) -> float:
    """A rank's popularity CV over one expert's: the mean of its n = E/ep experts drawn from E, sqrt(finite / n)
    with the finite-population factor (E - n) / (E - 1)."""
    per_rank = max(1.0, num_experts / ep)
    return math.sqrt(max(0.0, (num_experts - per_rank) / (num_experts - 1)) / per_rank)


def skew_cv(ep: int, num_experts: int, eplb: bool = False, expert_cv: float = 0.0) -> float:
    """Coefficient of variation of a rank's expert popularity (the mean of its n = E/ep experts' popularity);
    `expert_cv`: the experts' popularity CV (0: expert_load_cv's default)."""
    if ep <= 1 or num_experts <= 1:
        return 0.0
    rank_cv = expert_load_cv(expert_cv) * _rank_share(ep, num_experts)
    return rank_cv * eff.EPLB_RESIDUAL_IMBALANCE if eplb else rank_cv


def busiest_rank_load(
    ep: int, num_experts: int, top_k: int, tokens: float, eplb: bool = False, expert_cv: float = 0.0
) -> float:
    """Routed rows on the busiest of `ep` ranks over the mean for a step of `tokens` tokens (math.inf: the
    popularity skew alone); never above all the rows on one rank (ep). `expert_cv`: the experts' popularity CV
    (0: efficiency.EXPERT_LOAD_CV)."""
    if ep <= 1:
        return 1.0
    skew = skew_cv(ep, num_experts, eplb, expert_cv)
    mean_rows = tokens * top_k / ep
    sampling_var = (1.0 - 1.0 / ep) / mean_rows if 0 < mean_rows < math.inf else 0.0
    return min(float(ep), 1.0 + expected_max_normal(ep) * math.sqrt(skew * skew + sampling_var))


def expert_cv_from_load(ep: int, num_experts: int, max_over_mean: float, mean_rows: float, eplb: bool = False) -> float:
    """The experts' popularity CV that busiest_rank_load turns into `max_over_mean` (the busiest of `ep` ranks'
    routed rows over the mean, as an engine counted them) at `mean_rows` routed rows per rank (math.inf: counts
    summed over many steps): the sampling spread of that many rows taken off in quadrature, the EPLB residual and
    the rank's share of E / ep experts undone. 0 where the load is no more uneven than sampling alone makes it."""
    if ep <= 1 or num_experts <= 1 or max_over_mean <= 1.0:
        return 0.0
    excess = (max_over_mean - 1.0) / expected_max_normal(ep)
    sampling_var = (1.0 - 1.0 / ep) / mean_rows if 0 < mean_rows < math.inf else 0.0
    skew = math.sqrt(max(0.0, excess * excess - sampling_var))
    if eplb:
        skew /= eff.EPLB_RESIDUAL_IMBALANCE
    share = _rank_share(ep, num_experts)
    return skew / share if share > 0 else 0.0
