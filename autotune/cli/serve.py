"""`serve`, `bench`, `measure`, `report`: launch a run's plan, load it, measure it, rebuild its report."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import typer

from autotune import validate
from autotune.cli.app import app
from autotune.cli.options import check_host, check_port, workload_from_flags
from autotune.specs import MiTuneError, dump_json, rundir


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

    check_host(host)
    check_port(port)
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
            workload = workload_from_flags(isl, osl, 0 if burst else concurrency, rate, ttft_ms, tpot_ms, "throughput")
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

    check_host(host)
    check_port(port)
    validate.flags("measure", {"--top": top, "--num-requests": num_requests, "--ready-timeout": ready_timeout})
    from autotune.video.api import is_video_best

    if is_video_best(str(Path(run_dir) / rundir.BEST)):  # a video run: launch, bench and compare its best plan
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
