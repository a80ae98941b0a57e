"""`search` and `estimate`: predict plans on a box."""

from __future__ import annotations

import dataclasses
import json
import shlex
import sys

import typer

from autotune import validate
from autotune.capability.profiles import ENGINES
from autotune.cli.app import ARGV, app
from autotune.cli.options import (
    BURST,
    CONCURRENCY,
    DATASET,
    DRAFT_ACCEPTANCE,
    EXPERT_LOAD_CV,
    ISL,
    ISL_STD,
    LENGTH_DIST,
    LENGTHS_FILE,
    NUM_REQUESTS,
    OSL,
    OSL_STD,
    PREFIX_HIT_RATE,
    RATE,
    SLO_PERCENTILE,
    TPOT_MS,
    TTFT_MS,
    WORKLOAD_FILE,
    check_port,
    sim_flags,
    table,
    workload_from_flags,
)
from autotune.specs import MiTuneError, dump_json, dump_yaml


@app.command()
def search(
    model: str = typer.Option(..., "--model", help="Catalog name (see `mi-tune models`) or a path to a config.json."),
    hardware: str = typer.Option(None, "--hardware", help="Hardware profile YAML (from `mi-tune probe --out`)."),
    preset: str = typer.Option(None, "--preset", help="Hardware preset name (see `mi-tune presets`)."),
    gpus: int = typer.Option(0, "--gpus", help="Use only the first N GPUs (0 = all)."),
    engine: str = typer.Option("auto", "--engine", help="auto, or an engine: " + " | ".join(ENGINES)),
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
    expert_load_cv: float = EXPERT_LOAD_CV,
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
    flags = dict(locals())  # every flag as Typer parsed it, by parameter name (parse: search_options)
    from autotune import api

    if _video_search(flags):  # diffusion transformers: SGLang Diffusion (autotune/video/)
        return
    outcome = api.search(search_options(flags))
    print_search_outcome(outcome, as_json)


def _video_search(flags: dict) -> bool:
    """Check the video flags (whatever the model, like every other flag, before any work); run the video branch
    and say so when the model is a video model."""
    from autotune.video import is_video_model

    f = flags
    video_flags = {"--width": f["width"], "--height": f["height"], "--frames": f["frames"], "--steps": f["steps"],
                   "--guidance": f["guidance"], "--videos-per-hour": f["videos_per_hour"],
                   "--latency-slo-s": f["latency_slo_s"]}  # fmt: skip
    validate.flags("search", video_flags)
    if not is_video_model(f["model"]):
        return False
    from autotune.video.cli_run import video_search

    validate.flags("search", {"--concurrency": f["concurrency"], "--rate": f["rate"]})
    video = dict(width=f["width"], height=f["height"], frames=f["frames"], steps=f["steps"], guidance=f["guidance"],
                 videos_per_hour=f["videos_per_hour"] or f["rate"] * 3600.0, latency_slo_s=f["latency_slo_s"],
                 in_flight=f["concurrency"], objective=f["objective"])  # fmt: skip
    video_search(f["model"], f["hardware"], f["preset"], f["gpus"], video, f["workload_file"], f["out"],
                 f["keep_quality"], f["as_json"])  # fmt: skip
    return True


def search_options(flags: dict):
    """Parse: `search`'s flags (by parameter name) -> the library's `api.SearchOptions`; bad input raises."""
    from autotune import api

    f = flags
    for flag, value, allowed in (
        ("--engine", f["engine"], ("auto", *ENGINES)),
        ("--mode", f["mode"], ("auto", "aggregated", "disaggregated")),
    ):
        if value not in allowed:
            raise MiTuneError(f"{flag}: expected one of {', '.join(allowed)}, got '{value}'")
    validate.search_flags(f["trials"], f["timeout"], f["seed"], f["workers"], f["gpus"])
    validate.flags("search", {"--measure": f["measure"], "--measure-port": f["measure_port"] if f["measure"] else None})
    validate.run_dir("--out", f["out"])
    workload = workload_from_flags(
        f["isl"], f["osl"], f["concurrency"], f["rate"], f["ttft_ms"], f["tpot_ms"], f["objective"],
        f["workload_file"], f["dataset"],
        **sim_flags(f["burst"], f["length_dist"], f["isl_std"], f["osl_std"], f["lengths_file"],
                    f["prefix_hit_rate"], f["num_requests"], f["slo_percentile"], f["draft_acceptance"],
                    f["expert_load_cv"]),
    )  # fmt: skip
    opts = api.SearchOptions(
        model=f["model"],
        hardware=f["hardware"],
        preset=f["preset"],
        gpus=f["gpus"],
        engine=f["engine"],
        mode=f["mode"],
        workload=workload,
        trials=f["trials"],
        timeout_s=f["timeout"],
        seed=f["seed"],
        space=f["space"],
        storage=f["storage"],
        study=f["study"],
        workers=f["workers"],
        out=f["out"],
        progress=sys.stderr.isatty() and not f["quiet"],
        keep_precision=f["keep_precision"],
        command=("mi-tune", *ARGV),
    )
    if f["measure"]:
        from autotune.measure import MeasureOptions

        check_port(f["measure_port"])
        measure = MeasureOptions(f["measure"], port=f["measure_port"], stand_in=f["stand_in"])
        opts = dataclasses.replace(opts, measure=measure)
    return opts


def print_search_outcome(outcome, as_json: bool) -> None:
    """Format: the search's outcome as JSON or text; an interrupted search exits 130 after saying how to resume."""
    from autotune import api

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
    expert_load_cv: float = EXPERT_LOAD_CV,
    as_json: bool = typer.Option(False, "--json"),
    explain: bool = typer.Option(
        False, "--explain", help="Also predict each single-setting change the engine's rules admit on this box."
    ),
):
    """Predict one plan on a box."""
    from autotune import api

    workload = workload_from_flags(
        isl, osl, concurrency, rate, ttft_ms, tpot_ms, "throughput", workload_file, dataset,
        **sim_flags(burst, length_dist, isl_std, osl_std, lengths_file, prefix_hit_rate, num_requests, slo_percentile,
                     draft_acceptance, expert_load_cv),
    )  # fmt: skip
    plan_obj, prediction = api.estimate(plan, hardware, preset, workload, model)
    if explain and prediction.feasible:
        from autotune.report.tables import alternatives_frame

        rows = alternatives_frame(tuple(api.explain(plan, hardware, preset, workload, model, prediction)))
        print(table(rows.to_dict("records"), list(rows.columns)) if not rows.empty else "no setting changes it")
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
