"""The video branch of `mi-tune search`: build the workload from flags (or a workload file), run the search,
print the summary. Kept out of autotune/cli/ so the shared command stays a thin dispatch."""

from __future__ import annotations

import dataclasses
import json

from autotune.specs import rundir
from autotune.video.workload import VideoWorkload, load_workload


def video_search(model, hardware, preset, gpus, flags: dict, workload_file, out, keep_quality, as_json) -> None:
    from autotune import validate
    from autotune.inputs import resolve_hardware
    from autotune.video.api import search_video

    validate.run_dir("--out", out)
    hw, _ = resolve_hardware(hardware, preset, gpus)
    base = load_workload(workload_file) if workload_file else VideoWorkload()
    defaults = VideoWorkload()
    if flags.get("objective") == "throughput" and workload_file:
        flags = {**flags, "objective": base.objective}
    changed = {k: v for k, v in flags.items() if v != getattr(defaults, k)}
    work = dataclasses.replace(base, **changed)
    outcome = search_video(model, hw, work, out, keep_quality)
    best, default, exact = outcome.best, outcome.default, outcome.exact
    if as_json:
        print(json.dumps(json.loads((outcome.out / rundir.SUMMARY).read_text()), indent=2))
        return
    print(f"{model} on {hw.name}: {outcome.evaluated} plans in {outcome.elapsed_s:.1f} s")
    for name, o in (("best", best), ("engine default", default), ("best exact", exact)):
        if o is None:
            print(f"{name}: no feasible plan keeps the output exact")
            continue
        print(
            f"{name}: {o.plan.label()}: {o.cost.latency_s:,.1f} s per video, P95 {o.p95_s:,.1f} s, "
            f"{o.videos_per_hour:,.2f} videos/hour ({o.videos_per_hour_per_gpu:.3f} per GPU)"
            + ("" if o.exact else f"; changes the output: {'; '.join(o.changes)}")
        )
    print(f"wrote {outcome.files['best']}; report: {outcome.files['report']}")


def video_bench(url, workload_file, concurrency: int, rate_rps: float, num_requests: int, as_json: bool) -> None:
    """`mi-tune bench --endpoint videos`: the video workload from a file (or 720p/81 frames/model default steps),
    --concurrency videos in flight or --rate videos/s (Poisson)."""
    from autotune.specs import MiTuneError
    from autotune.video.bench import bench_video, format_bench
    from autotune.video.workload import check

    if concurrency and rate_rps:
        raise MiTuneError("--concurrency / --rate: give one of them")
    if num_requests < 0:
        raise MiTuneError(f"--num-requests: expected a positive count, got {num_requests}")
    work = load_workload(workload_file) if workload_file else VideoWorkload()
    if concurrency:
        work = dataclasses.replace(work, in_flight=concurrency, videos_per_hour=0.0)
    if rate_rps:
        work = dataclasses.replace(work, videos_per_hour=rate_rps * 3600.0)
    check(work)
    report = bench_video(url, work, num_requests or max(4, 2 * (work.in_flight or 1)))
    print(json.dumps(report, indent=2) if as_json else format_bench(report))
