"""Workload: what traffic the deployment must serve and what it optimises.

Lengths: `isl`/`osl` are the mean input/output tokens per request. `length_dist` says how each request's lengths
are drawn around them: `fixed` (every request isl/osl), `normal` or `lognormal` (standard deviations `isl_std`,
`osl_std` in tokens), or `file` (the (input, output) rows of `lengths_file`, a CSV or JSONL, replayed in order).
`dataset` names the built-in length profile (catalog/datasets.yaml) the lengths came from, if any.

Arrivals (sim/trace.py turns a workload into requests): `rate_rps` > 0 is open-loop Poisson at that rate; `burst`
> 0 sends `burst` requests at t=0 (a benchmark's "request rate inf"); otherwise the loop is closed, keeping
`concurrency` requests in flight (0 = as many as the deployment admits).

SLOs: `ttft_ms` and `tpot_ms` hold on the `slo_percentile`-th percentile of the requests (default 95, the level
public serving reports quote); `ttft_percentile` is the v1 name of the same setting, read from older files.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

OBJECTIVES = ("throughput", "goodput", "pareto")
LENGTH_DISTS = ("fixed", "normal", "lognormal", "file")
DEFAULT_SLO_PERCENTILE = 95.0
# The largest expert-popularity CV a workload may give: one expert of E taking every routed row has a CV of
# sqrt(E - 1) (population std over the mean), 31.98 at 1,024 experts, more than any catalog model routes to
MAX_EXPERT_LOAD_CV = 32.0


@dataclass(frozen=True)
class Workload:
    isl: int = 4096  # mean input tokens per request
    osl: int = 1024  # mean output tokens per request
    concurrency: int = 0  # closed loop: requests kept in flight; 0 = as many as the plan can hold
    rate_rps: float = 0.0  # open loop: Poisson arrivals, requests/s; 0 = closed loop (or burst)
    num_requests: int = 1000  # requests in a simulated trace (a burst sends `burst` instead)
    ttft_ms: float = 0.0  # SLO on TTFT at `slo_percentile`; 0 = none
    tpot_ms: float = 0.0  # SLO on TPOT at `slo_percentile`; 0 = none
    ttft_percentile: float = 0.0  # v1 name of slo_percentile (older files); 0 = not given
    objective: str = "throughput"
    burst: int = 0  # requests that all arrive at t=0; 0 = no burst
    length_dist: str = "fixed"
    isl_std: float = 0.0  # tokens, for normal/lognormal
    osl_std: float = 0.0
    lengths_file: str = ""  # CSV/JSONL of (input_tokens, output_tokens), for length_dist: file
    dataset: str = ""  # built-in length profile the lengths came from (catalog/datasets.yaml), for the record
    prefix_hit_rate: float = 0.0  # share of each prompt's tokens found in the prefix cache, 0..1
    slo_percentile: float = DEFAULT_SLO_PERCENTILE
    draft_acceptance: float = 0.0  # per-draft-token speculative acceptance, [0, 1); 0 = eff.draft_acceptance
    # coefficient of variation of the routed experts' popularity under this traffic (perf/ep_balance.py); it sets
    # the busiest expert-parallel rank's load. 0 = the model's default (ep_balance.expert_load_cv)
    expert_load_cv: float = 0.0
    schema: str = "mi-tune/workload/v1"

    def __post_init__(self) -> None:
        if self.ttft_percentile:  # a v1 file: its percentile is the SLO percentile
            object.__setattr__(self, "slo_percentile", self.ttft_percentile)
            object.__setattr__(self, "ttft_percentile", 0.0)
        for name in ("rate_rps", "ttft_ms", "tpot_ms", "isl_std", "osl_std", "prefix_hit_rate", "slo_percentile"):
            if not math.isfinite(getattr(self, name)):
                raise ValueError(f"{name}: expected a finite number, got {getattr(self, name)}")
        if self.isl < 1 or self.osl < 1:
            raise ValueError(f"isl/osl: expected positive token counts, got {self.isl}/{self.osl}")
        if self.ttft_ms < 0 or self.tpot_ms < 0:
            raise ValueError(
                f"ttft_ms/tpot_ms: expected values >= 0 (0 = no SLO), got {self.ttft_ms:g}/{self.tpot_ms:g}"
            )
        if self.concurrency < 0 or self.rate_rps < 0 or self.burst < 0:
            raise ValueError("concurrency/rate_rps/burst: expected values >= 0")
        if sum(bool(x) for x in (self.concurrency, self.rate_rps, self.burst)) > 1:
            raise ValueError("concurrency, rate_rps and burst are alternatives: give one, not both")
        if not 0.0 <= self.draft_acceptance < 1.0:  # NaN fails the comparison too
            raise ValueError(f"draft_acceptance: expected a share in [0, 1) (0 = default), got {self.draft_acceptance}")
        if not 0.0 <= self.expert_load_cv <= MAX_EXPERT_LOAD_CV:  # NaN fails the comparison too
            raise ValueError(
                f"expert_load_cv: expected a coefficient of variation in [0, {MAX_EXPERT_LOAD_CV:g}] (0 = default), "
                f"got {self.expert_load_cv}"
            )
        if self.num_requests < 1:
            raise ValueError(f"num_requests: expected a positive count, got {self.num_requests}")
        if self.objective not in OBJECTIVES:
            raise ValueError(f"objective: expected one of {', '.join(OBJECTIVES)}, got {self.objective!r}")
        if not 0 < self.slo_percentile < 100:
            raise ValueError(f"slo_percentile: expected a value in (0, 100), got {self.slo_percentile}")
        if self.length_dist not in LENGTH_DISTS:
            raise ValueError(f"length_dist: expected one of {', '.join(LENGTH_DISTS)}, got {self.length_dist!r}")
        if self.isl_std < 0 or self.osl_std < 0:
            raise ValueError("isl_std/osl_std: expected values >= 0")
        if (self.length_dist == "file") != bool(self.lengths_file):
            raise ValueError("length_dist 'file' and lengths_file go together: give both or neither")
        if not 0 <= self.prefix_hit_rate < 1:
            raise ValueError(f"prefix_hit_rate: expected a share in [0, 1), got {self.prefix_hit_rate}")

    @property
    def has_slo(self) -> bool:
        return self.ttft_ms > 0 or self.tpot_ms > 0

    def meets_slo(self, ttft_ms: float, tpot_ms: float) -> bool:
        """Whether a TTFT and a TPOT (ms) are within this workload's SLO (`within_slo`)."""
        return within_slo(ttft_ms, tpot_ms, self.ttft_ms, self.tpot_ms)

    @property
    def arrival(self) -> str:
        """closed | poisson | burst"""
        return "poisson" if self.rate_rps else "burst" if self.burst else "closed"

    @property
    def uniform(self) -> bool:
        """Every request has the same lengths (steady-state formulas describe it exactly)."""
        return self.length_dist == "fixed" or (self.length_dist != "file" and not self.isl_std and not self.osl_std)


def within_slo(ttft_ms: float, tpot_ms: float, slo_ttft_ms: float, slo_tpot_ms: float) -> bool:
    """The SLO check, stated once: TTFT and TPOT each within its limit (ms); a limit of 0 is no limit."""
    return (not slo_ttft_ms or ttft_ms <= slo_ttft_ms) and (not slo_tpot_ms or tpot_ms <= slo_tpot_ms)
