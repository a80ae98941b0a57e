"""mi-tune command line: each command parses its flags, calls one library function and prints.

Exit codes: 0 success, 2 bad input (one line on stderr), 1 internal failure.
"""

from __future__ import annotations

import dataclasses
import errno
import ipaddress
import json
import os
import re
import shlex
import sys
from pathlib import Path

import typer

from autotune import validate
from autotune.specs import MiTuneError, Workload, dump_json, dump_yaml, save

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="Find the fastest vLLM/SGLang serving plan for this box, and launch it.",
)
kernels_app = typer.Typer(no_args_is_help=True, help="Fused-MoE Triton configs for vLLM/SGLang: tune-moe, check.")
app.add_typer(kernels_app, name="kernels")


# The workload options `search` and `estimate` share (one declaration; `bench` has its own: it sends requests).
ISL = typer.Option(4096, "--isl", help="Input tokens per request.")
OSL = typer.Option(1024, "--osl", help="Output tokens per request.")
CONCURRENCY = typer.Option(0, "--concurrency", help="Requests in flight (0 = as many as fit).")
RATE = typer.Option(0.0, "--rate", help="Arrival rate, requests/s (instead of --concurrency).")
TTFT_MS = typer.Option(0.0, "--ttft-ms", help="SLO: time to first token at --slo-percentile, ms.")
TPOT_MS = typer.Option(0.0, "--tpot-ms", help="SLO: time per output token at --slo-percentile, ms.")
WORKLOAD_FILE = typer.Option(None, "--workload", help="Workload YAML (mi-tune/workload/v1); flags override.")
DATASET = typer.Option(None, "--dataset", help="Built-in length profile, e.g. sharegpt-stats.")
BURST = typer.Option(0, "--burst", help="N requests all at t=0 (instead of --concurrency/--rate).")
LENGTH_DIST = typer.Option("fixed", "--length-dist", help="fixed | normal | lognormal | file")
ISL_STD = typer.Option(0.0, "--isl-std", help="Input tokens' standard deviation (normal/lognormal).")
OSL_STD = typer.Option(0.0, "--osl-std", help="Output tokens' standard deviation (normal/lognormal).")
LENGTHS_FILE = typer.Option("", "--lengths-file", help="CSV/JSONL of (input, output) token counts.")
PREFIX_HIT_RATE = typer.Option(0.0, "--prefix-hit-rate", help="Share of prompt tokens cached, 0..1.")
NUM_REQUESTS = typer.Option(1000, "--num-requests", help="Requests the simulator runs.")
SLO_PERCENTILE = typer.Option(95.0, "--slo-percentile", help="Percentile --ttft-ms/--tpot-ms hold at (default 95).")
DRAFT_ACCEPTANCE = typer.Option(
    0.0, "--draft-acceptance", help="Speculative decoding: per-draft-token acceptance, 0..1 (0 = the model's default)."
)


def _workload(
    isl: int,
    osl: int,
    concurrency: int,
    rate: float,
    ttft_ms: float,
    tpot_ms: float,
    objective: str,
    file: str | None = None,
    dataset: str | None = None,
    **extra,
) -> Workload:
    validate.workload_flags(isl, osl, concurrency, rate, ttft_ms, tpot_ms)
    validate.simulator_flags(extra)
    if file or dataset or extra:  # --workload / --dataset / the simulator's workload flags (sim/workloads.py)
        from autotune.sim.workloads import build, load_workload_file

        flags = dict(isl=isl, osl=osl, concurrency=concurrency, rate_rps=rate, ttft_ms=ttft_ms, tpot_ms=tpot_ms)
        flags.update(objective=objective, **extra)
        if file or dataset:  # a file or a profile: only flags given away from their defaults override it
            flags = {k: v for k, v in flags.items() if v != getattr(Workload(), k)}
            if flags.keys() & {"concurrency", "rate_rps", "burst"}:  # the flags' arrival replaces the file's
                flags = {"concurrency": 0, "rate_rps": 0.0, "burst": 0, **flags}
        return build(load_workload_file(file) if file else None, dataset, flags)
    try:
        return Workload(
            isl=isl,
            osl=osl,
            concurrency=concurrency,
            rate_rps=rate,
            ttft_ms=ttft_ms,
            tpot_ms=tpot_ms,
            objective=objective,
        )
    except ValueError as exc:
        raise MiTuneError(f"workload flags: {exc}") from None


def _sim_flags(burst, length_dist, isl_std, osl_std, lengths_file, prefix_hit_rate, num_requests, slo, accept=0.0):
    """The simulator's workload flags given away from their defaults (Workload fields)."""
    flags = dict(
        draft_acceptance=accept,
        burst=burst,
        length_dist="file" if lengths_file and length_dist == "fixed" else length_dist,
        isl_std=isl_std,
        osl_std=osl_std,
        lengths_file=lengths_file,
        prefix_hit_rate=prefix_hit_rate,
        num_requests=num_requests,
        slo_percentile=slo,
    )
    return {k: v for k, v in flags.items() if v != getattr(Workload(), k)}


def _table(rows: list[dict], columns: list[str]) -> str:
    cells = [[_fmt(r.get(c, "")) for c in columns] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) if cells else len(c) for i, c in enumerate(columns)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True))]
    lines += ["  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)) for row in cells]
    return "\n".join(lines)


def _fmt(value) -> str:
    if isinstance(value, float):
        return f"{value:,.1f}"
    return str(value)


@app.command()
def probe(
    out: Path = typer.Option(None, "--out", help="Write the hardware profile as YAML to FILE."),
    as_json: bool = typer.Option(False, "--json", help="Print the hardware profile as JSON."),
    bench: bool = typer.Option(
        False, "--bench", help="Measure GEMM/MoE/attention/copy/collective rates into the profile (torch + a GPU)."
    ),
    quick: bool = typer.Option(False, "--quick", help="With --bench: a ~1-minute subset."),
    sysfs_root: Path = typer.Option(None, "--sysfs-root", help="Read a recorded /sys tree (NVML is not used)."),
    proc_root: Path = typer.Option(None, "--proc-root", help="Read a recorded /proc tree (NVML is not used)."),
    bench_device: str = typer.Option("cuda", "--bench-device", hidden=True),  # "cpu": the harness on CPU (tests)
):
    """Discover this machine: host, accelerators, PCIe/NVLink topology, P2P."""
    from autotune import probe as probe_mod
    from autotune.probe.bench import calibrate

    validate.out_file("--out", out)
    result = probe_mod.probe_roots(sysfs_root, proc_root)
    if bench:
        result = calibrate(result, quick=quick, device=bench_device)
    elif quick:
        raise MiTuneError("--quick: applies to --bench only")
    if as_json:
        print(
            dump_json(result.profile)
            if result.profile
            else json.dumps({"host": _host_dict(result), "accelerators": []})
        )
    else:
        print(probe_mod.format_probe(result))
    if out and result.profile is None:
        print(f"--out {out}: no accelerators found, so no hardware profile was written", file=sys.stderr)
    elif out:
        save(result.profile, out)
        print(f"wrote {out}", file=sys.stderr)


def _host_dict(result) -> dict:
    from autotune.specs import to_dict

    return to_dict(result.host)


@app.command()
def models():
    """List the built-in models."""
    from autotune.catalog.models import model_rows

    columns = ["name", "family", "total_params_b", "active_params_b", "kv_bytes_per_token", "state_bytes_per_seq"]
    print(_table(model_rows(), [*columns, "hf_id"]))
    from autotune.video.catalog import video_model_rows

    print("\nvideo (SGLang Diffusion):")
    print(_table(video_model_rows(), ["name", "family", "total_params_b", "active_params_b", "hf_id"]))


@app.command()
def presets():
    """List the built-in hardware presets."""
    from autotune.catalog.presets import preset_rows

    rows = preset_rows()
    print(_table(rows, list(rows[0])))


@app.command()
def search(
    model: str = typer.Option(..., "--model", help="Catalog name (see `mi-tune models`) or a path to a config.json."),
    hardware: str = typer.Option(None, "--hardware", help="Hardware profile YAML (from `mi-tune probe --out`)."),
    preset: str = typer.Option(None, "--preset", help="Hardware preset name (see `mi-tune presets`)."),
    gpus: int = typer.Option(0, "--gpus", help="Use only the first N GPUs (0 = all)."),
    engine: str = typer.Option("auto", "--engine", help="vllm | sglang | auto"),
    mode: str = typer.Option("auto", "--mode", help="aggregated | disaggregated | auto"),
    isl: int = ISL,
    osl: int = OSL,
    concurrency: int = CONCURRENCY,
    rate: float = RATE,
    ttft_ms: float = TTFT_MS,
    tpot_ms: float = TPOT_MS,
    objective: str = typer.Option(
        "throughput",
        "--objective",
        help="throughput | goodput (throughput where the SLO holds) | pareto (multi-objective study: throughput "
        "per GPU vs P95 TTFT vs P95 TPOT; pareto.csv holds the front, best.yaml the most throughput meeting the SLO).",
    ),
    workload_file: str = WORKLOAD_FILE,
    dataset: str = DATASET,
    burst: int = BURST,
    length_dist: str = LENGTH_DIST,
    isl_std: float = ISL_STD,
    osl_std: float = OSL_STD,
    lengths_file: str = LENGTHS_FILE,
    prefix_hit_rate: float = PREFIX_HIT_RATE,
    num_requests: int = NUM_REQUESTS,
    slo_percentile: float = SLO_PERCENTILE,
    draft_acceptance: float = DRAFT_ACCEPTANCE,
    trials: int = typer.Option(200, "--trials", min=1, help="Optuna trials."),
    timeout: float = typer.Option(
        None, "--timeout", help="Stop the search after S seconds (all workers); the outputs hold the trials done."
    ),
    seed: int = typer.Option(0, "--seed", help="Sampler seed: the same seed gives the same result."),
    space: str = typer.Option(None, "--space", help="Search-space YAML (default: search_spaces/default.yaml)."),
    storage: str = typer.Option(
        None,
        "--storage",
        help="Study storage shared by processes/machines: sqlite:///PATH, journal:PATH (or a .log/.journal path), "
        "postgresql://USER@HOST/DB (default: study.journal in the run dir).",
    ),
    study: str = typer.Option(None, "--study", help="Study name inside the storage."),
    workers: int = typer.Option(
        1, "--workers", min=1, help="Worker processes on one study (each its own seed; results then vary)."
    ),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar (it shows only on a terminal)."),
    as_json: bool = typer.Option(False, "--json", help="Print a machine-readable summary (JSON) instead of text."),
    out: str = typer.Option(None, "--out", help="Run directory (default results/<model>-<hardware>-<time>/)."),
    measure: int = typer.Option(0, "--measure", help="Then launch, bench and fit the top K plans."),
    measure_port: int = typer.Option(8000, "--measure-port", help="With --measure: the endpoint's port."),
    stand_in: str = typer.Option(None, "--stand-in", help="Test: --measure launches the stand-in engine."),
    keep_precision: bool = typer.Option(
        False, "--keep-precision", help="Keep the checkpoint's numerics: no online FP8 weights, no FP8 KV cache."
    ),
    width: int = typer.Option(1280, "--width", help="Video models: frame width, pixels."),
    height: int = typer.Option(720, "--height", help="Video models: frame height, pixels."),
    frames: int = typer.Option(81, "--frames", help="Video models: frames per video (4k+1)."),
    steps: int = typer.Option(0, "--steps", help="Video models: denoising steps (0 = the model's default)."),
    guidance: float = typer.Option(-1.0, "--guidance", help="Video models: guidance scale (>1 runs CFG; <0 default)."),
    videos_per_hour: float = typer.Option(0.0, "--videos-per-hour", help="Video models: Poisson arrivals per hour."),
    latency_slo_s: float = typer.Option(0.0, "--latency-slo-s", help="Video models: P95 latency per video SLO, s."),
    keep_quality: bool = typer.Option(
        False, "--keep-quality", help="Video models: only plans that keep the output (dense attention, no cache-dit)."
    ),
):
    """Search plans against the performance model; write best.yaml and a report."""
    from autotune import api
    from autotune.video import is_video_model

    video_flags = {"--width": width, "--height": height, "--frames": frames, "--steps": steps, "--guidance": guidance,
                   "--videos-per-hour": videos_per_hour, "--latency-slo-s": latency_slo_s}  # fmt: skip
    validate.flags("search", video_flags)  # checked whatever the model, like every other flag, before any work
    if is_video_model(model):  # diffusion transformers: SGLang Diffusion (autotune/video/)
        from autotune.video.cli_run import video_search

        validate.flags("search", {"--concurrency": concurrency, "--rate": rate})
        video = dict(width=width, height=height, frames=frames, steps=steps, guidance=guidance,
                     videos_per_hour=videos_per_hour or rate * 3600.0, latency_slo_s=latency_slo_s,
                     in_flight=concurrency, objective=objective)  # fmt: skip
        return video_search(model, hardware, preset, gpus, video, workload_file, out, keep_quality, as_json)

    for flag, value, allowed in (
        ("--engine", engine, ("auto", "vllm", "sglang")),
        ("--mode", mode, ("auto", "aggregated", "disaggregated")),
    ):
        if value not in allowed:
            raise MiTuneError(f"{flag}: expected one of {', '.join(allowed)}, got '{value}'")
    validate.search_flags(trials, timeout, seed, workers, gpus)
    validate.flags("search", {"--measure": measure, "--measure-port": measure_port if measure else None})
    validate.run_dir("--out", out)
    opts = api.SearchOptions(
        model=model,
        hardware=hardware,
        preset=preset,
        gpus=gpus,
        engine=engine,
        mode=mode,
        workload=_workload(
            isl, osl, concurrency, rate, ttft_ms, tpot_ms, objective, workload_file, dataset,
            **_sim_flags(burst, length_dist, isl_std, osl_std, lengths_file, prefix_hit_rate, num_requests,
                         slo_percentile, draft_acceptance),
        ),  # fmt: skip
        trials=trials,
        timeout_s=timeout,
        seed=seed,
        space=space,
        storage=storage,
        study=study,
        workers=workers,
        out=out,
        progress=sys.stderr.isatty() and not quiet,
        keep_precision=keep_precision,
        command=("mi-tune", *_ARGV),
    )
    if measure:
        from autotune.measure import MeasureOptions

        _check_port(measure_port)
        opts = dataclasses.replace(opts, measure=MeasureOptions(measure, port=measure_port, stand_in=stand_in))
    outcome = api.search(opts)
    if as_json:
        print(json.dumps(api.search_summary(outcome), indent=2))
        if outcome.interrupted:
            raise typer.Exit(130)
        return
    for note in outcome.notes:
        print(note)
    best = outcome.best
    print(f"{best.model.name} on {best.hardware.summary}")
    stopped = " (stopped by --timeout)" if outcome.timed_out else " (interrupted)" if outcome.interrupted else ""
    print(
        f"searched {outcome.new_trials} new trials{stopped} in {outcome.elapsed_s:.1f} s ({outcome.trials} in the "
        f"study; {outcome.strategy})"
    )
    from autotune.report.console import best_lines, top_lines

    print("\n".join(top_lines(outcome) + best_lines(outcome)))
    print(f"wrote {outcome.out}/best.yaml; report: {outcome.files['report']}")
    if outcome.interrupted:
        print(
            f"mi-tune: interrupted after {outcome.new_trials} new trials; best.yaml and the report hold the "
            f"{outcome.trials} trials done. Resume with: {shlex.join(outcome.resume)}",
            file=sys.stderr,
        )
        raise typer.Exit(130)
    if outcome.measured is not None:
        from autotune.measure import format_outcome

        print(format_outcome(outcome.measured))


@app.command()
def estimate(
    plan: str = typer.Argument(..., help="A plan YAML or a best.yaml."),
    model: str = typer.Option(None, "--model", help="Model (default: the one best.yaml names)."),
    hardware: str = typer.Option(None, "--hardware"),
    preset: str = typer.Option(None, "--preset"),
    isl: int = ISL,
    osl: int = OSL,
    concurrency: int = CONCURRENCY,
    rate: float = RATE,
    ttft_ms: float = TTFT_MS,
    tpot_ms: float = TPOT_MS,
    workload_file: str = WORKLOAD_FILE,
    dataset: str = DATASET,
    burst: int = BURST,
    length_dist: str = LENGTH_DIST,
    isl_std: float = ISL_STD,
    osl_std: float = OSL_STD,
    lengths_file: str = LENGTHS_FILE,
    prefix_hit_rate: float = PREFIX_HIT_RATE,
    num_requests: int = NUM_REQUESTS,
    slo_percentile: float = SLO_PERCENTILE,
    draft_acceptance: float = DRAFT_ACCEPTANCE,
    as_json: bool = typer.Option(False, "--json"),
    explain: bool = typer.Option(
        False, "--explain", help="Also predict each single-setting change the engine's rules admit on this box."
    ),
):
    """Predict one plan on a box."""
    from autotune import api

    workload = _workload(
        isl, osl, concurrency, rate, ttft_ms, tpot_ms, "throughput", workload_file, dataset,
        **_sim_flags(burst, length_dist, isl_std, osl_std, lengths_file, prefix_hit_rate, num_requests, slo_percentile,
                     draft_acceptance),
    )  # fmt: skip
    plan_obj, prediction = api.estimate(plan, hardware, preset, workload, model)
    if explain and prediction.feasible:
        from autotune.report.tables import alternatives_frame

        rows = alternatives_frame(tuple(api.explain(plan, hardware, preset, workload, model, prediction)))
        print(_table(rows.to_dict("records"), list(rows.columns)) if not rows.empty else "no setting changes it")
    if as_json:
        print(dump_json(prediction))
        if not prediction.feasible:
            raise typer.Exit(2)
        return
    if not prediction.feasible:  # an engine rule it breaks, or memory: say why on one line
        raise MiTuneError(f"{plan}: cannot run: {prediction.reason}")
    print(plan_obj.describe())
    if prediction.note:  # e.g. an offered rate above the plan's capacity
        print(f"note: {prediction.note}")
    print(dump_yaml(prediction))


HOST_LABEL = re.compile(r"[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?")
MAX_PORT = 65535


def _check_host(host: str | None) -> None:
    """A host name (RFC 1123 labels) or an IP literal; anything else (whitespace, shell characters) is bad input."""
    if host is None:
        return
    try:
        ipaddress.ip_address(host)
        return
    except ValueError:
        pass
    name = host[:-1] if host.endswith(".") else host
    if not (0 < len(name) <= 253 and all(HOST_LABEL.fullmatch(label) for label in name.split("."))):
        raise MiTuneError(f"--host: expected a host name or an IP address (no brackets), got {host!r}")


def _check_port(port: int | None) -> None:
    if port is not None and not 1 <= port <= MAX_PORT:
        raise MiTuneError(f"--port: expected 1..{MAX_PORT}, got {port}")


@app.command()
def serve(
    best: str = typer.Argument(..., help="best.yaml written by `mi-tune search`."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the commands without starting them."),
    host: str = typer.Option(None, "--host", help="Address every server and the router bind (default 127.0.0.1)."),
    port: int = typer.Option(
        None,
        "--port",
        help="Port of the client endpoint (default 8000); servers behind a router take the ports above it.",
    ),
    stand_in: str = typer.Option(None, "--stand-in", help="Test: run the stand-in engine (timing JSON)."),
):
    """Rebuild the launch of a best.yaml from its plan, model and hardware, and start it (or print it)."""
    from autotune import api
    from autotune.engines import format_launch, run_launch

    _check_host(host)
    _check_port(port)
    from autotune.video.api import is_video_best, video_serve_launch

    if is_video_best(best):
        launch = video_serve_launch(best, host, port)
    else:
        served = api.serve_launch(best, host, port)
        for warning in served.warnings:
            print(f"mi-tune: warning: {warning}", file=sys.stderr)
        launch = served.launch
    if stand_in:
        from autotune.engines.standin import substitute

        if launch.engine == "sglang-diffusion":
            from autotune.video.standin import substitute
        launch = substitute(launch, stand_in)
    print(format_launch(launch))
    if dry_run:
        return
    print(f"endpoint: {launch.endpoint}", file=sys.stderr)
    code = run_launch(launch)
    if code:
        raise typer.Exit(code)


@app.command()
def bench(
    url: str = typer.Option(None, "--url", help="OpenAI-compatible server, e.g. http://127.0.0.1:8000."),
    from_file: str = typer.Option(
        None, "--from-file", help="Report a `vllm bench serve --save-result` JSON or SGLang bench_serving JSONL."
    ),
    model: str = typer.Option("", "--model", help="Model id to request (default: the first /v1/models lists)."),
    endpoint: str = typer.Option("completions", "--endpoint", help="completions | chat | videos (SGLang Diffusion)"),
    workload_file: str = typer.Option(None, "--workload", help="Workload YAML (mi-tune/workload/v1)."),
    isl: int = typer.Option(4096, "--isl", help="Input tokens per request."),
    osl: int = typer.Option(1024, "--osl", help="Output tokens per request."),
    concurrency: int = typer.Option(0, "--concurrency", help="Closed loop: requests in flight."),
    rate: float = typer.Option(0.0, "--rate", help="Open loop: Poisson arrivals, requests/s."),
    burst: int = typer.Option(0, "--burst", help="Send N requests at once."),
    num_requests: int = typer.Option(0, "--num-requests", help="Requests to send (0 = the workload's)."),
    ttft_ms: float = typer.Option(0.0, "--ttft-ms", help="Goodput SLO: TTFT, ms (0 = none)."),
    tpot_ms: float = typer.Option(0.0, "--tpot-ms", help="Goodput SLO: TPOT, ms (0 = none)."),
    seed: int = typer.Option(0, "--seed", help="Seed of the trace and the prompt tokens."),
    connect_timeout: float = typer.Option(10.0, "--connect-timeout", help="Seconds to open a connection."),
    first_token_timeout: float = typer.Option(
        600.0, "--first-token-timeout", help="Seconds from sending a request to its first token."
    ),
    idle_timeout: float = typer.Option(60.0, "--idle-timeout", help="Seconds between two events of a stream."),
    max_failed: float = typer.Option(
        0.0, "--max-failed", help="Share of requests that may fail (0..1) before bench exits 1 (default: none)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
):
    """Load an OpenAI-compatible server (streaming) and report throughput, TTFT/TPOT/ITL/E2E and goodput.
    A request that stalls past a timeout or whose stream ends before [DONE] fails; exit 1 when more than
    --max-failed of the requests failed."""
    from autotune import loadgen
    from autotune.specs import load_workload

    if (url is None) == (from_file is None):
        raise MiTuneError("--url / --from-file: give one of them")
    numbers = {"--isl": isl, "--osl": osl, "--concurrency": concurrency, "--rate": rate, "--burst": burst,
               "--num-requests": num_requests, "--ttft-ms": ttft_ms, "--tpot-ms": tpot_ms, "--seed": seed,
               "--connect-timeout": connect_timeout, "--first-token-timeout": first_token_timeout,
               "--idle-timeout": idle_timeout, "--max-failed": max_failed}  # fmt: skip
    validate.flags("bench", numbers)
    if endpoint == "videos":  # SGLang Diffusion's video API (autotune/video/bench.py)
        from autotune.video.cli_run import video_bench

        return video_bench(url, workload_file, concurrency, rate, num_requests, as_json)
    if from_file:
        report = loadgen.read_result(from_file, ttft_ms, tpot_ms)
    else:
        if workload_file:
            workload = load_workload(workload_file)
            extra = {"concurrency": concurrency, "rate_rps": rate, "burst": burst, "ttft_ms": ttft_ms,
                     "tpot_ms": tpot_ms}  # fmt: skip
            given = {k: v for k, v in extra.items() if v}
            if given.keys() & {"concurrency", "rate_rps", "burst"}:  # the flags' arrival replaces the file's
                given = {"concurrency": 0, "rate_rps": 0.0, "burst": 0, **given}
            try:
                workload = dataclasses.replace(workload, **given)
            except ValueError as exc:
                raise MiTuneError(f"--workload {workload_file}: {exc}") from None
        else:
            workload = _workload(isl, osl, 0 if burst else concurrency, rate, ttft_ms, tpot_ms, "throughput")
            if burst:
                if concurrency or rate:
                    raise MiTuneError("--burst: give one of --concurrency, --rate and --burst")
                workload = dataclasses.replace(workload, burst=burst)
        if num_requests < 0:
            raise MiTuneError(f"--num-requests: expected a positive count, got {num_requests}")
        timeouts = loadgen.Timeouts(connect_timeout, first_token_timeout, idle_timeout)
        report = loadgen.bench(
            url, workload, model=model, endpoint=endpoint, num_requests=num_requests or None, seed=seed,
            timeouts=timeouts,
        )  # fmt: skip
    print(dump_json(report) if as_json else loadgen.format_report(report))
    if url and report.num_requests and report.failed > max_failed * report.num_requests:
        first = f"; first error: {report.errors[0]}" if report.errors else ""
        print(
            f"mi-tune: bench failed: {report.failed} of {report.num_requests} requests failed (--max-failed "
            f"{max_failed:g}){first}",
            file=sys.stderr,
        )
        raise typer.Exit(1)


@app.command()
def measure(
    run_dir: str = typer.Argument(..., help="A run directory written by `mi-tune search`."),
    top: int = typer.Option(2, "--top", help="Plans to launch and bench, best predicted first."),
    host: str = typer.Option("127.0.0.1", "--host", help="Address the engines bind."),
    port: int = typer.Option(8000, "--port", help="Port of the endpoint benched (routed servers take ports above)."),
    num_requests: int = typer.Option(0, "--num-requests", help="Requests per plan (0 = 4 rounds of the concurrency)."),
    ready_timeout: float = typer.Option(1800.0, "--ready-timeout", help="Seconds an engine may take to be healthy."),
    stand_in: str = typer.Option(None, "--stand-in", help="Test: launch the stand-in engine (timing JSON)."),
    apply: bool = typer.Option(
        False, "--apply", help="Make the best measured plan best.yaml (the search's kept as best-predicted.yaml)."
    ),
):
    """Launch the run's top plans one by one, bench each with its workload, fit corrections, re-rank."""
    from autotune import api
    from autotune.measure import MeasureOptions, format_outcome

    _check_host(host)
    _check_port(port)
    validate.flags("measure", {"--top": top, "--num-requests": num_requests, "--ready-timeout": ready_timeout})
    from autotune.video.api import is_video_best

    if is_video_best(str(Path(run_dir) / "best.yaml")):  # a video run: launch, bench and compare its best plan
        from autotune.video.bench import measure_video_run

        print(json.dumps(measure_video_run(run_dir, host, port, stand_in, ready_timeout, num_requests), indent=2))
        return
    opts = MeasureOptions(top, host, port, stand_in, ready_timeout, num_requests, apply=apply)
    print(format_outcome(api.measure_run(run_dir, opts)))


@app.command()
def report(
    run_dir: str = typer.Argument(..., help="A run directory written by `mi-tune search`."),
    repredict: bool = typer.Option(
        False, "--repredict", help="Also predict the stored plans again with this mi-tune, beside the stored figures."
    ),
):
    """Rebuild the report of a run directory from its own files (the predictions stored by the search)."""
    from autotune import api

    files = api.rebuild_report(run_dir, repredict)
    print(f"wrote {files['report']} and {files['html']}")


@kernels_app.command("check")
def kernels_check():
    """Compare mi-tune's fused-MoE Triton kernel with its torch reference (CPU: Triton interpreter)."""
    from autotune.kernels import check

    rows = check()
    print(_table(rows, list(rows[0])))
    failed = sum(row["ok"] != "yes" for row in rows)
    print(f"{len(rows) - failed} passed, {failed} failed")
    if failed:
        raise typer.Exit(1)


@kernels_app.command("tune-moe")
def kernels_tune_moe(
    best: str = typer.Option(None, "--best", help="A best.yaml: tune the shapes its plan runs (instead of --model)."),
    model: str = typer.Option(None, "--model", help="Catalog name (see `mi-tune models`) or a path to a config.json."),
    tp: int = typer.Option(0, "--tp", help="GPUs of the MoE layers (a plan's tp x dp)."),
    ep: int = typer.Option(1, "--ep", help="Expert-parallel size (1: experts split over tp; tp: whole experts)."),
    dtype: str = typer.Option("bf16", "--dtype", help="bf16 | fp8_w8a8 (file names also: int8_w8a16, int4_w4a16)"),
    engine: str = typer.Option("both", "--engine", help="vllm | sglang | both"),
    batch_sizes: str = typer.Option("", "--batch-sizes", help="Comma-separated tokens per step (default 1..4096)."),
    trials: int = typer.Option(40, "--trials", help="Configs timed in full per batch size."),
    seed: int = typer.Option(0, "--seed"),
    out: str = typer.Option(None, "--out", help="Directory (default moe_configs; with --best <run dir>/moe_configs)."),
    block_shape: str = typer.Option(None, "--block-shape", help="FP8 weight scale block N,K or none."),
    hardware: str = typer.Option(None, "--hardware", help="Without a GPU: the profile whose GPU names the files."),
    preset: str = typer.Option(None, "--preset", help="Without a GPU: the preset whose GPU names the files."),
    device_name: str = typer.Option(None, "--device-name", help="GPU name as torch prints it (overrides)."),
    triton_version: str = typer.Option(None, "--triton-version", help="SGLang folder (default: installed)."),
    device: str = typer.Option("cuda", "--device", help="cuda, or cpu (Triton interpreter; for tests)."),
    own_kernel: bool = typer.Option(False, "--own-kernel", help="Time mi-tune's kernel even with the engine here."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the files each engine looks up and the space."),
):
    """Tune the engines' fused-MoE Triton configs on this GPU and write them where vLLM / SGLang read them."""
    from autotune.kernels.moe_tune import build_request, check_device, describe, requests_from_best, tune_moe

    validate.flags("kernels", {"--tp": tp, "--ep": ep, "--trials": trials, "--seed": seed})
    try:
        sizes = tuple(int(b) for b in batch_sizes.split(",") if b.strip())
    except ValueError:
        raise MiTuneError(f"--batch-sizes: expected comma-separated integers, got {batch_sizes!r}") from None
    options = dict(batch_sizes=sizes, trials=trials, seed=seed, device_name=device_name,
                   triton_version=triton_version, device=device, own_kernel=own_kernel)  # fmt: skip
    if best:
        if model or tp or ep != 1 or dtype != "bf16" or engine != "both" or block_shape:
            raise MiTuneError("--best takes model, layout, dtype and engine from the plan: drop --model/--tp/--ep/"
                              "--dtype/--engine/--block-shape")  # fmt: skip
        requests, notes = requests_from_best(best, out, **options)
    elif not model or tp < 1:
        raise MiTuneError("--model and --tp are required (or --best RUN_DIR/best.yaml)")
    else:
        req, notes = build_request(model, tp, ep, dtype, engine, out_dir=out or "moe_configs",
                                   block_shape=block_shape, hardware=hardware, preset=preset, **options)  # fmt: skip
        requests = [req]
    if not dry_run:
        check_device(requests[0])
    for note in notes:
        print(f"mi-tune: {note}", file=sys.stderr)
    for req in requests:
        print(describe(req))
    if dry_run:
        return
    for req in requests:
        for path in tune_moe(req, log=lambda line: print(line, file=sys.stderr)):
            print(f"wrote {path}")


_ARGV: list[str] = []  # this invocation's arguments: `search` records how to resume a run


def run(argv: list[str] | None = None) -> int:
    """Run the CLI; returns the exit code (0 ok, 2 bad input, 1 internal failure)."""
    _ARGV[:] = sys.argv[1:] if argv is None else list(argv)
    try:
        # parser errors come back as exceptions; Ctrl-C inside a command comes back as 130 (the command says what
        # it kept, e.g. search's best-so-far)
        code = app(args=argv, prog_name="mi-tune", standalone_mode=False)
        return code if isinstance(code, int) else 0
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except typer.Abort:
        print("mi-tune: interrupted", file=sys.stderr)
        return 130
    except MiTuneError as exc:
        print(f"mi-tune: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("mi-tune: interrupted", file=sys.stderr)
        return 130
    except OSError as exc:
        if exc.errno in WRITE_ERRNOS and exc.filename and not os.environ.get("MI_TUNE_DEBUG"):
            # a path the user chose that cannot be written (a file where a folder goes, /sys, a full disk)
            print(f"mi-tune: error: {exc.filename}: cannot write ({exc.strerror})", file=sys.stderr)
            return 2
        return _internal(exc)
    except Exception as exc:  # internal failure: one line, traceback on request
        if _is_click(exc, "NoArgsIsHelpError"):  # `mi-tune` or `mi-tune kernels` alone: the help
            exc.show()
            return exc.exit_code
        if _is_click(exc, "ClickException"):  # a usage error (unknown flag, a value of the wrong type): one line
            print(f"mi-tune: error: {_usage_message(exc)}", file=sys.stderr)
            return 2
        return _internal(exc)
    return 0


# errno values of a write the user's environment refuses (not a bug of mi-tune): cli.run says which path
WRITE_ERRNOS = {errno.EACCES, errno.EPERM, errno.EEXIST, errno.ENOTDIR, errno.EISDIR, errno.EROFS, errno.ENOSPC}
WRITE_ERRNOS |= {errno.EDQUOT, errno.ENAMETOOLONG}


def _internal(exc: Exception) -> int:
    if os.environ.get("MI_TUNE_DEBUG"):
        raise exc
    message = f"mi-tune: internal error: {type(exc).__name__}: {exc} (set MI_TUNE_DEBUG=1 for a traceback)"
    print(message, file=sys.stderr)
    return 1


def _is_click(exc: Exception, name: str) -> bool:
    """Whether `exc` is click's exception class `name` (Typer vendors click in newer releases, so the class is
    matched by name rather than imported)."""
    return any(cls.__name__ == name for cls in type(exc).__mro__)


def _usage_message(exc) -> str:
    text = " ".join(exc.format_message().split())
    ctx = getattr(exc, "ctx", None)
    return f"{text} (see '{ctx.command_path} --help')" if ctx is not None else text


def main() -> None:
    sys.exit(run())
