"""One candidate: write its best.yaml, launch it with `serve`'s launch, wait for health, warm up, bench, stop."""

from __future__ import annotations

import dataclasses
import re
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

from autotune.capability.profiles import profile
from autotune.measure import expert_load
from autotune.measure.acceptance import draft_acceptance, metrics_text, parse_prometheus, tokens_per_step
from autotune.measure.judge import RESIMULATED, STORED, Judge, compared, judge_of, operating_point
from autotune.measure.records import Candidate, MeasureOptions
from autotune.measure.rows import plan_row
from autotune.specs import BestConfig, HardwareProfile, MiTuneError, ModelSpec, Plan, Prediction, Workload, rundir, save

# Before the timed bench, one untimed round of short requests (WARMUP_OSL output tokens) at the benched concurrency
# (WARMUP_REQUESTS for open-loop workloads): kernels JIT-compiled on first use, allocator growth and the like are
# paid before the clock starts, as the engines' own bench clients do with their warm-up requests.
WARMUP_OSL = 16
WARMUP_REQUESTS = 8
HEALTH_POLL_S = 0.2


def bench_workload(workload: Workload, prediction: Prediction) -> tuple[Workload, int]:
    """The workload as benched, and its concurrency cap: a closed loop the search left open ('as many as fit')
    runs at the predicted operating point's concurrency, so measured and predicted describe the same point."""
    if workload.arrival != "closed":
        return workload, 0
    n = workload.concurrency or max(1, prediction.concurrency)
    return dataclasses.replace(workload, concurrency=n), n


def _num_requests(workload: Workload, concurrency: int, asked: int) -> int:
    if asked:
        return asked
    if workload.arrival == "burst":
        return workload.burst
    if workload.arrival == "poisson":  # about two minutes of arrivals, at least 16
        return max(16, min(workload.num_requests, int(workload.rate_rps * 120)))
    return max(16, 4 * concurrency)


def _slug(label: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", label).strip("-")[:60]


def _wait_healthy(url: str, started, timeout_s: float) -> str:
    """'' once GET url/health answers 200; else why not (an engine exited, or the timeout)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        why = started.exited()
        if why:
            return why
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=2.0) as resp:  # noqa: S310 (http to our engine)
                if resp.status == 200:
                    return ""
        except (urllib.error.URLError, OSError, ValueError):
            pass
        time.sleep(HEALTH_POLL_S)
    tail = started.last_lines()
    return f"not healthy after {timeout_s:.0f} s (GET {url}/health)" + (f"; last lines:\n{tail}" if tail else "")


def measure_plan(
    cand: Candidate,
    n: int,
    best: BestConfig,
    model: ModelSpec,
    hw: HardwareProfile,
    run_dir: Path,
    opts: MeasureOptions,
    log: Callable[[str], None],
) -> dict:
    """Launch, wait for health, bench, stop: the plan's measured.csv row (status ok or failed), its predicted
    figures the ones the search stood behind for the benched workload (judge.py), with their source."""
    from autotune.engines import build_launch

    where = run_dir / rundir.MEASURE / f"{n:02d}-{_slug(cand.label)}"
    where.mkdir(parents=True, exist_ok=True)
    plan_file = where / rundir.BEST
    judge, tag = judge_of(best, model), f"[{n}] {cand.label}"
    searched = best.workload
    workload, concurrency = bench_workload(searched, operating_point(cand, judge, hw, searched))
    requests = _num_requests(workload, concurrency, opts.num_requests)
    if concurrency and requests < concurrency:  # the bench cannot hold the operating point's requests in flight
        log(f"{tag}: {requests} requests cannot keep {concurrency} in flight: predicted again at {requests} in "
            f"flight, the point the bench measures")  # fmt: skip
        workload, concurrency = dataclasses.replace(workload, concurrency=requests), requests
    prediction, source, why = compared(cand, judge, hw, searched, workload, requests)
    log(f"{tag}: compared with " + _source_text(source, prediction, judge, why))
    row = {
        **plan_row(cand, prediction, concurrency, plan_file, run_dir),
        "requests": requests,
        "prediction_source": source,
    }
    if not prediction.feasible:
        return {**row, "status": "failed", "error": f"predicted infeasible: {prediction.reason}"}
    try:
        launch = build_launch(cand.plan, model, hw)
    except MiTuneError as exc:
        return {**row, "status": "failed", "error": f"cannot launch: {exc}"}
    save(dataclasses.replace(best, engine=cand.plan.engine, mode=cand.plan.mode, phases=cand.plan.phases,
                             prediction=prediction, launch=launch), plan_file)  # fmt: skip
    report, bench_s, why, tokens, texts = _serve_and_bench(plan_file, where, workload, concurrency, requests, opts,
                                                           tag, log, cand.plan)  # fmt: skip
    if report is None:
        return {**row, "status": "failed", "error": why}
    log(f"{tag}: {report.total_tok_s:,.0f} tok/s measured in {bench_s:.1f} s "
        f"(predicted {prediction.total_tok_s:,.0f}, {source})")  # fmt: skip
    per_pass = concurrency * (tokens or 1.0)  # tokens a decode pass routes: sequences x tokens each advances
    skew = _expert_load(cand, model, texts, where / "engine.log", per_pass, tag, log)
    return {**row, **_measured(report), **_speculation(cand, tokens, tag, log), **skew}


def _expert_load(cand: Candidate, model: ModelSpec, texts: tuple[str, str], engine_log: Path, tokens_per_pass: float,
                 tag: str, log: Callable[[str], None]) -> dict:  # fmt: skip
    """The row's measured expert-popularity CV (measure/expert_load.py) where the engine reported its ranks'
    expert loads: SGLang's balancedness summary read around the bench, vLLM's EPLB log lines (empty otherwise)."""
    phase = cand.plan.decoding
    if not model.is_moe or phase.ep <= 1:
        return {}
    engine = cand.plan.engine
    report = profile(engine).expert_load_report
    if report == "balancedness_metric":
        cv = expert_load.sglang_cv(*texts, model, phase.ep, tokens_per_pass, phase.eplb)
    elif report == "eplb_log" and phase.eplb:
        cv = expert_load.vllm_cv(
            engine_log.read_text(errors="replace") if engine_log.is_file() else "", model, phase.ep
        )
    else:
        log(f"{tag}: {engine} reports no expert loads for this plan: expert load CV not measured")
        return {}
    if cv is None:
        log(f"{tag}: the engine reported no expert loads: expert load CV not measured")
        return {}
    log(f"{tag}: expert popularity CV {cv:.3f} measured at EP{phase.ep}")
    return {"measured_expert_load_cv": cv}


def _speculation(cand: Candidate, tokens: float | None, tag: str, log: Callable[[str], None]) -> dict:
    """The row's measured speculative acceptance: tokens advanced per verify step as the engine counted them and
    the per-draft-token acceptance they imply at the plan's draft length (empty without speculation or counters)."""
    spec = cand.plan.decoding.speculative
    if spec.method == "none":
        return {}
    if tokens is None:
        log(f"{tag}: the engine reported no speculative counters at /metrics: "
            "acceptance not measured")  # fmt: skip
        return {}
    accepted = draft_acceptance(tokens, spec.draft_tokens)
    log(f"{tag}: speculative {spec.method}/{spec.draft_tokens}: {tokens:.2f} tokens per step measured, "
        f"{accepted:.3f} per draft token")  # fmt: skip
    return {"measured_tokens_per_step": round(tokens, 4), "measured_draft_acceptance": accepted}


def _source_text(source: str, prediction: Prediction, judge: Judge, why: str) -> str:
    """How the figure a plan is compared with was made, for the log."""
    how = (
        f"simulated over {prediction.simulated_requests} requests at P{prediction.slo_percentile:g}, seed {judge.seed}"
        if prediction.simulated_requests
        else "steady state"
    )
    if source == STORED:
        return f"the search's stored prediction ({how})"
    made = "re-simulated" if source == RESIMULATED else "made again"
    return f"a prediction {made} at the benched workload ({how}), not the stored one: {why}"


def _serve_and_bench(plan_file: Path, where: Path, workload: Workload, concurrency: int, requests: int,
                     opts: MeasureOptions, tag: str, log: Callable[[str], None], plan: Plan):  # fmt: skip
    """(bench report, bench seconds, '', speculative tokens per step or None, the /metrics texts before and after)
    of the plan file served as `serve` would, with the engine's expert-load recorder on where it has one
    (expert_load.with_recorder), or (None, 0, why not, None, ('', '')). The engine's /metrics is read around the
    measured bench (acceptance.py, expert_load.py)."""
    from autotune import loadgen
    from autotune.engines.serve import serve_launch
    from autotune.engines.supervisor import Started

    launch = expert_load.with_recorder(serve_launch(str(plan_file), opts.host, opts.port).launch, plan)
    if opts.stand_in:
        from autotune.engines.standin import substitute

        launch = substitute(launch, opts.stand_in)
    log(f"{tag}: starting ({launch.endpoint}, log {where / 'engine.log'})")
    with (where / "engine.log").open("w") as engine_log:
        try:
            started = Started(launch, engine_log, opts.ready_timeout_s)
        except MiTuneError as exc:
            return None, 0.0, str(exc), None, ("", "")
        try:
            why = _wait_healthy(launch.endpoint, started, opts.ready_timeout_s)
            if why:
                log(f"{tag}: failed to start")
                return None, 0.0, why, None, ("", "")
            warm_n = concurrency or WARMUP_REQUESTS  # one round at the benched batch size: JIT, graphs, caches
            warm = dataclasses.replace(workload, osl=min(workload.osl, WARMUP_OSL), concurrency=warm_n, rate_rps=0.0,
                                       burst=0)  # fmt: skip
            loadgen.bench(launch.endpoint, warm, num_requests=warm_n, concurrency=warm_n, seed=1)
            before = metrics_text(launch.endpoint)
            t0 = time.perf_counter()
            report = loadgen.bench(launch.endpoint, workload, num_requests=requests, concurrency=concurrency)
            bench_s = time.perf_counter() - t0
            after = metrics_text(launch.endpoint)
            tokens = tokens_per_step(parse_prometheus(before), parse_prometheus(after))
            return report, bench_s, "", tokens, (before, after)
        finally:
            started.stop(opts.grace_s)


def _measured(report) -> dict:
    """The row's measured half from a bench report."""
    ok = report.completed > 0 and not report.failed
    return {
        "status": "ok" if ok else "failed",
        "requests": report.num_requests,
        "measured_total_tok_s": round(report.total_tok_s, 3),
        "measured_output_tok_s": round(report.output_tok_s, 3),
        "measured_ttft_ms": round(report.ttft_ms.get("mean", 0.0), 4),
        "measured_tpot_ms": round(report.tpot_ms.get("mean", 0.0), 4),
        "measured_ttft_p99_ms": round(report.ttft_ms.get("p99", 0.0), 4),
        "measured_tpot_p99_ms": round(report.tpot_ms.get("p99", 0.0), 4),
        "measured_goodput_tok_s": round(report.goodput_tok_s or 0.0, 3),
        "failed_requests": report.failed,
        "error": "" if ok else "; ".join(report.errors) or "no request completed",
    }
