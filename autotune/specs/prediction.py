"""Prediction: what perf expects a plan to deliver, with the breakdown that says why."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class StepBreakdown:
    """One forward step of one engine instance in a phase, at the simulated operating point, ms."""

    phase: str  # prefill | decode
    batch_tokens: int  # tokens processed by one instance in this step
    step_ms: float
    compute_ms: float  # GEMM + attention time bound by FLOPs
    memory_ms: float  # time bound by HBM bytes (weights, KV, activations) beyond compute
    comm_ms: dict[str, float] = field(default_factory=dict)  # per collective: allreduce, all2all, allgather, p2p
    bubble_ms: float = 0.0  # pipeline bubble
    overlap_saved_ms: float = 0.0  # communication hidden behind compute
    launch_ms: float = 0.0  # kernel launch / CPU overheads
    rates_ms: dict[str, float] = field(default_factory=dict)  # time per rates-table entry "class/dtype/bucket"


@dataclass(frozen=True)
class MemoryFit:
    """Per-GPU memory in GB."""

    weights_gb: float
    kv_gb: float
    activations_gb: float
    reserve_gb: float
    capacity_gb: float
    kv_tokens: int  # tokens of KV the instance can hold
    state_gb: float = 0.0  # linear-attention state of the running requests (hybrid models; out of the KV pool)


@dataclass(frozen=True)
class Prediction:
    feasible: bool
    reason: str = ""  # why not, when infeasible
    input_tok_s: float = 0.0
    output_tok_s: float = 0.0
    total_tok_s: float = 0.0
    total_tok_s_per_gpu: float = 0.0
    output_tok_s_per_gpu: float = 0.0
    request_rate_rps: float = 0.0
    concurrency: int = 0  # requests in flight at the operating point
    # latencies: "mean" (steady state, or the simulated mean), and p50/p90/p95/p99 when simulated (sim/)
    ttft_ms: dict[str, float] = field(default_factory=dict)
    tpot_ms: dict[str, float] = field(default_factory=dict)
    slo_met: bool = True
    memory: dict[str, MemoryFit] = field(default_factory=dict)  # per phase
    steps: tuple[StepBreakdown, ...] = ()
    kv_transfer_ms: float = 0.0  # disaggregated: prefill -> decode KV move per request
    # rates-table entries ("class/dtype/bucket") that carried > 1% of a step's time -> their provenance
    # (datasheet-prior, public:<calibration id>, probe, measured-run, fitted; see perf/rates.py)
    rates: dict[str, str] = field(default_factory=dict)
    capacity_rps: float = 0.0  # the most requests/s the plan sustains (its maximum-throughput operating point)
    note: str = ""  # caveat on a feasible prediction, e.g. an offered rate above capacity_rps
    e2e_ms: dict[str, float] = field(default_factory=dict)  # end-to-end latency per request, simulated
    queue_ms: dict[str, float] = field(default_factory=dict)  # arrival to admission into a batch, simulated
    goodput_rps: float = 0.0  # requests/s that meet every SLO (all of them without an SLO), simulated
    simulated_requests: int = 0  # requests the discrete-event simulator ran (0: steady-state figures only)
    slo_percentile: float = 0.0  # the percentile slo_met was checked on (0: on steady-state means)
