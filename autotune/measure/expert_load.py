"""The experts' popularity CV of the benched traffic, as the engine itself counted its expert-parallel ranks'
routed rows, turned into the input the model takes (Workload.expert_load_cv; perf/ep_balance.py).

Both engines report the busiest rank against the mean, which ep_balance.expert_cv_from_load inverts (the sampling
spread of a step's routed rows taken off, E / ep experts a rank undone):
- SGLang 0.5.23: with `--expert-distribution-recorder-mode stat` and `--expert-balancedness-report-mode
  prometheus` (both off by default, arg_groups/fields/exec_.py:935-946) the recorder starts itself
  (eplb/expert_distribution.py:232-237) and every forward pass observes its balancedness, the mean over MoE
  layers of (mean rank load) / (max rank load) (compute_utilization_rate, expert_distribution.py:1153-1168), into
  the Prometheus summary `sglang:eplb_balancedness`, labelled by forward mode
  (observability/metrics_collector.py:1025-1030, managers/scheduler_components/metrics_reporter.py:1190-1195;
  /metrics needs --enable-metrics). Its decode passes over the bench: 1 / (delta sum / delta count).
- vLLM 0.34.0: with EPLB on and `--eplb-config '{"log_balancedness": true}'` (EPLBConfig, config/parallel.py:86-91)
  EP rank 0 logs every step "EPLB step: N for model M: avg_tokens=A, max_tokens=X, balancedness=B, ..."
  (distributed/eplb/eplb_state.py:716-736), A and X the per-layer mean and max rank loads summed over the MoE
  layers (_compute_eplb_load_stats, eplb_state.py:67-72). Until the first rearrangement (step_interval 3000
  steps by default; the step count restarts at 0 after it) the experts sit where they started, so those lines are
  the popularity skew without EPLB's rebalancing. A plan without EPLB is not switched to it for a measurement
  (that would change what is benched), so vLLM plans without EPLB go unmeasured here.
The recorders cost the engine a little per pass (SGLang reduces each pass's per-GPU counts to rank 0,
expert_distribution.py:821-828; vLLM syncs the step's loads, eplb_state.py:618-625): the measured throughput
carries it. Where an engine counts a token's rows once per DP rank (vLLM without an all-to-all kernel: vllm#22167),
the rows per rank read high and the sampling spread taken off low, so the CV reads a little high.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re

from autotune.capability.profiles import profile
from autotune.perf import ep_balance
from autotune.specs import Launch, ModelSpec, PhasePlan, Plan
from autotune.specs.workload import MAX_EXPERT_LOAD_CV

SGLANG_BALANCEDNESS = "sglang:eplb_balancedness"
SGLANG_RECORDER = (
    "--enable-metrics",
    "--expert-distribution-recorder-mode",
    "stat",
    "--expert-balancedness-report-mode",
    "prometheus",
)
VLLM_LOG_CONFIG = {"log_balancedness": True}
VLLM_STEP = re.compile(
    r"EPLB step: (\d+) for model \S+: avg_tokens=([0-9.]+), max_tokens=([0-9]+), balancedness=([0-9.]+)"
)
MIN_MEASURED_CV = 0.01  # Workload.expert_load_cv 0 is "the default": an even load reads as this
_SAMPLE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)\{([^}]*)\}\s+(\S+)")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def _phase_of(plan: Plan, role: str) -> PhasePlan | None:
    return plan.phases.get("both" if role == "server" else role)


def recorder_flags(engine: str, phase: PhasePlan, argv: tuple[str, ...]) -> tuple[str, ...]:
    """The flags that make `engine` count its ranks' expert loads for this phase (() where it cannot, or EP is 1)."""
    if phase.ep <= 1:
        return ()
    report = profile(engine).expert_load_report
    if report == "balancedness_metric":
        return tuple(f for f in SGLANG_RECORDER if f != "--enable-metrics" or f not in argv)
    if report == "eplb_log" and phase.eplb and "--eplb-config" not in argv:
        return ("--eplb-config", json.dumps(VLLM_LOG_CONFIG, separators=(",", ":")))
    return ()


def with_recorder(launch: Launch, plan: Plan) -> Launch:
    """`launch` with each engine process given recorder_flags (measure only: `serve` launches the plan as is)."""
    processes = []
    for p in launch.processes:
        phase = _phase_of(plan, p.role)
        extra = recorder_flags(launch.engine, phase, p.argv) if phase is not None else ()
        processes.append(dataclasses.replace(p, argv=(*p.argv, *extra)) if extra else p)
    return dataclasses.replace(launch, processes=tuple(processes))


def balancedness_summary(text: str, mode: str = "decode") -> tuple[float, float]:
    """(sum, count) of SGLang's balancedness summary over its `forward_mode` = `mode` samples, from /metrics text."""
    total = {"_sum": 0.0, "_count": 0.0}
    for line in text.splitlines():
        m = _SAMPLE.match(line.strip())
        if not m or not m.group(1).startswith(SGLANG_BALANCEDNESS):
            continue
        suffix = m.group(1)[len(SGLANG_BALANCEDNESS) :]
        if suffix not in total or dict(_LABEL.findall(m.group(2))).get("forward_mode") != mode:
            continue
        try:
            value = float(m.group(3))
        except ValueError:
            continue
        if math.isfinite(value):
            total[suffix] += value
    return total["_sum"], total["_count"]


def sglang_max_over_mean(before: str, after: str) -> float | None:
    """The busiest rank's load over the mean in the decode passes between two /metrics reads (None: none counted)."""
    s0, c0 = balancedness_summary(before)
    s1, c1 = balancedness_summary(after)
    if c1 - c0 <= 0 or s1 - s0 <= 0:
        return None
    return (c1 - c0) / (s1 - s0)


def vllm_steps(log_text: str) -> list[tuple[float, float]]:
    """(avg_tokens, max_tokens) of each EPLB step vLLM logged before its first rearrangement (the step count
    restarts there), steps without load (dummy and profile runs) left out."""
    out, last = [], -1
    for m in VLLM_STEP.finditer(log_text):
        step = int(m.group(1))
        if step < last:
            break
        last = step
        avg, top = float(m.group(2)), float(m.group(3))
        if avg > 0 and top >= avg:
            out.append((avg, top))
    return out


def _moe_layers(model: ModelSpec) -> tuple[int, int, int]:
    """(MoE layers, routed experts, experts per token) of the model."""
    moe = [layer.ffn for layer in model.layers if layer.ffn.kind == "moe"]
    return len(moe), model.num_experts, max((f.experts_per_token for f in moe), default=1)


def _clamped(cv: float) -> float:
    return round(min(MAX_EXPERT_LOAD_CV, max(MIN_MEASURED_CV, cv)), 4)


def vllm_cv(log_text: str, model: ModelSpec, ep: int) -> float | None:
    """The popularity CV of vLLM's logged steps: each step inverted at its own routed rows per rank and layer
    (avg_tokens / MoE layers), weighted by its rows. None without logged steps."""
    layers, experts, _ = _moe_layers(model)
    steps = vllm_steps(log_text)
    if not steps or not layers:
        return None
    weight = sum(avg for avg, _ in steps)
    cv = sum(avg * ep_balance.expert_cv_from_load(ep, experts, top / avg, avg / layers) for avg, top in steps)
    return _clamped(cv / weight)


def sglang_cv(
    before: str, after: str, model: ModelSpec, ep: int, tokens_per_pass: float, eplb: bool = False
) -> float | None:
    """The popularity CV of SGLang's decode passes over the bench, `tokens_per_pass` the tokens one decode pass
    routes (the benched concurrency times the tokens a sequence advances; a pass that runs fewer makes this read
    the CV a little high). With EPLB on, SGLang rebalances every 1,000 passes (eplb_rebalance_num_iterations,
    arg_groups/fields/exec_.py:924-926), so its passes are read as EPLB's residual. None without counted passes."""
    ratio = sglang_max_over_mean(before, after)
    _, experts, top_k = _moe_layers(model)
    if ratio is None or tokens_per_pass <= 0:
        return None
    return _clamped(ep_balance.expert_cv_from_load(ep, experts, ratio, tokens_per_pass * top_k / ep, eplb))
