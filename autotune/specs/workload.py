"""Workload: what traffic the deployment must serve and what it optimises."""

from __future__ import annotations

from dataclasses import dataclass

OBJECTIVES = ("throughput", "goodput", "pareto")


@dataclass(frozen=True)
class Workload:
    isl: int = 4096  # input tokens per request
    osl: int = 1024  # output tokens per request
    concurrency: int = 0  # fixed number of requests in flight; 0 = as many as the plan can hold
    rate_rps: float = 0.0  # open-loop arrival rate, requests/s; 0 = closed loop at `concurrency`
    num_requests: int = 1000
    ttft_ms: float = 0.0  # SLO on TTFT at `ttft_percentile`; 0 = none
    tpot_ms: float = 0.0  # SLO on mean TPOT; 0 = none
    ttft_percentile: float = 99.0
    objective: str = "throughput"
    schema: str = "mi-tune/workload/v1"

    def __post_init__(self) -> None:
        if self.isl < 1 or self.osl < 1:
            raise ValueError(f"isl/osl: expected positive token counts, got {self.isl}/{self.osl}")
        if self.concurrency < 0 or self.rate_rps < 0:
            raise ValueError("concurrency/rate_rps: expected values >= 0")
        if self.concurrency and self.rate_rps:
            raise ValueError("give either concurrency or rate_rps, not both")
        if self.objective not in OBJECTIVES:
            raise ValueError(f"objective: expected one of {', '.join(OBJECTIVES)}, got {self.objective!r}")
        if not 0 < self.ttft_percentile < 100:
            raise ValueError(f"ttft_percentile: expected a value in (0, 100), got {self.ttft_percentile}")

    @property
    def has_slo(self) -> bool:
        return self.ttft_ms > 0 or self.tpot_ms > 0
