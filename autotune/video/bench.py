"""Load a SGLang Diffusion video endpoint and measure latency per video and videos/hour; `measure` for a video run
directory: launch its best plan (or the stand-in), bench it with the run's workload, compare with the prediction.

The protocol is SGLang Diffusion's asynchronous video API, as its own benchmark drives it
(benchmarks/bench_serving.py:327-400): POST /v1/videos with prompt, size "WxH", num_frames and
num_inference_steps returns a job id; GET /v1/videos/{id} is polled until status is completed or failed.
"""

from __future__ import annotations

import dataclasses
import json
import random
import socket
import statistics
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

from autotune.specs import MiTuneError, rundir
from autotune.specs.io import from_dict, read_document
from autotune.video.workload import VideoWorkload

PROMPT = "A red fox runs through fresh snow at dawn, cinematic, 4k"
POLL_S = 1.0  # bench_serving.py:395 polls once a second


def _post(url: str, doc: dict, timeout_s: float) -> dict:
    req = urllib.request.Request(url, json.dumps(doc).encode(), {"Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(req, timeout=timeout_s) as resp:  # noqa: S310 (the user's endpoint)
        return json.loads(resp.read() or b"{}")


def _get(url: str, timeout_s: float) -> dict:
    with urllib.request.urlopen(url, timeout=timeout_s) as resp:  # noqa: S310
        return json.loads(resp.read() or b"{}")


def _one(base: str, work: VideoWorkload, poll_s: float, timeout_s: float) -> tuple[float, str]:
    """(seconds from submit to completed, error or '')."""
    body = {"prompt": PROMPT, "size": f"{work.width}x{work.height}", "num_frames": work.frames}
    if work.steps:
        body["num_inference_steps"] = work.steps
    if work.guidance >= 0:
        body["guidance_scale"] = work.guidance
    start = time.monotonic()
    try:
        job = _post(f"{base}/v1/videos", body, timeout_s)
        job_id = job.get("id")
        if not job_id:
            return 0.0, f"no job id in {job}"
        while time.monotonic() - start < timeout_s:
            status = _get(f"{base}/v1/videos/{job_id}", timeout_s)
            if status.get("status") == "completed":
                return time.monotonic() - start, ""
            if status.get("status") == "failed":
                return 0.0, f"job failed: {status.get('error')}"
            time.sleep(poll_s)
        return 0.0, f"not completed within {timeout_s:g} s"
    except (urllib.error.URLError, OSError, ValueError) as exc:
        return 0.0, f"{base}: {exc}"


def bench_video(url: str, work: VideoWorkload, num_requests: int, poll_s: float = POLL_S, timeout_s: float = 7200.0):
    """Closed loop (work.in_flight, default 1) or open loop (work.videos_per_hour, Poisson, seed 0)."""
    base = url.rstrip("/").removesuffix("/v1/videos")
    latencies: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()

    def record(result: tuple[float, str]) -> None:
        with lock:
            (errors.append(result[1]) if result[1] else latencies.append(result[0]))

    start = time.monotonic()
    if work.videos_per_hour:
        rng, threads, t = random.Random(0), [], 0.0
        for _ in range(num_requests):
            t += rng.expovariate(work.videos_per_hour / 3600.0)
            time.sleep(max(0.0, start + t - time.monotonic()))
            th = threading.Thread(target=lambda: record(_one(base, work, poll_s, timeout_s)), daemon=True)
            th.start()
            threads.append(th)
    else:
        remaining = iter(range(num_requests))

        def client() -> None:
            for _ in remaining:
                record(_one(base, work, poll_s, timeout_s))

        threads = [threading.Thread(target=client, daemon=True) for _ in range(max(1, work.in_flight or 1))]
        for th in threads:
            th.start()
    for th in threads:
        th.join()
    duration = time.monotonic() - start
    if not latencies:
        raise MiTuneError(f"bench: no video completed ({errors[0] if errors else 'no requests'})")
    ordered = sorted(latencies)
    return {
        "url": url,
        "requests": num_requests,
        "completed": len(latencies),
        "failed": len(errors),
        "first_error": errors[0] if errors else "",
        "duration_s": round(duration, 3),
        "latency_p50_s": round(ordered[len(ordered) // 2], 3),
        "latency_p95_s": round(ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))], 3),
        "latency_mean_s": round(statistics.fmean(latencies), 3),
        "videos_per_hour": round(len(latencies) / duration * 3600.0, 2),
    }


def format_bench(report: dict) -> str:
    return (
        f"{report['completed']}/{report['requests']} videos in {report['duration_s']:.1f} s: latency P50 "
        f"{report['latency_p50_s']:.2f} s, P95 {report['latency_p95_s']:.2f} s, {report['videos_per_hour']:,.1f} "
        f"videos/hour" + (f"; {report['failed']} failed: {report['first_error']}" if report["failed"] else "")
    )


def _accepts(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def measure_video_run(run_dir: str, host: str, port: int, stand_in: str | None, ready_s: float, num_requests: int):
    """Launch the run's best plan, bench it with the run's workload, write measured.json beside best.yaml."""
    from autotune.engines.supervisor import Started
    from autotune.video.api import video_serve_launch

    best_path = Path(run_dir) / rundir.BEST
    doc = read_document(best_path)
    work = from_dict(VideoWorkload, doc["workload"], f"{best_path}: workload")
    launch = video_serve_launch(str(best_path), host, port)
    if stand_in:
        from autotune.video.standin import substitute

        launch = substitute(launch, stand_in)
    replicas = int(doc["best"]["plan"]["replicas"])
    if not work.in_flight and not work.videos_per_hour:  # the search's closed loop: one video per replica
        work = dataclasses.replace(work, in_flight=replicas)
    count = num_requests or 2 * replicas
    log = open(Path(run_dir) / "measure.log", "w")  # noqa: SIM115 (closed below)
    started = Started(launch, log)
    try:
        deadline = time.monotonic() + ready_s
        while not _accepts(host, port):
            if started.exited() or time.monotonic() > deadline:
                raise MiTuneError(f"measure: the server did not come up: {started.exited() or 'timeout'}")
            time.sleep(0.1)
        poll = 0.05 if stand_in else POLL_S
        measured = bench_video(launch.endpoint, work, count, poll_s=poll)
    finally:
        started.stop()
        log.close()
    predicted = doc["best"]
    result = {
        "plan": predicted["label"],
        "predicted": {k: predicted[k] for k in ("latency_s", "p50_s", "p95_s", "videos_per_hour")},
        "measured": measured,
        "latency_measured_over_predicted": round(measured["latency_p50_s"] / predicted["p50_s"], 3),
        "stand_in": bool(stand_in),
    }
    (Path(run_dir) / "measured.json").write_text(json.dumps(result, indent=2))
    return result
