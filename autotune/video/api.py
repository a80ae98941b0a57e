"""Library entry points of the video path: search (writes best.yaml, report.md, summary.json) and the launch of a
video best.yaml. The CLI's `search` and `serve` route here by the model's kind / the file's schema."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from autotune.engines.supervisor import format_launch
from autotune.specs import HardwareProfile, MiTuneError, SpecError, rundir
from autotune.specs.best import Launch
from autotune.specs.io import from_dict, read_document
from autotune.video import emit, report
from autotune.video.catalog import load_video_model
from autotune.video.plan import VideoPlan
from autotune.video.rules import violations
from autotune.video.search import Outcome, engine_default, evaluate, same_quality_best, search
from autotune.video.workload import VideoWorkload, check


@dataclass(frozen=True)
class VideoSearchOutcome:
    out: Path
    best: Outcome
    default: Outcome
    exact: Outcome | None
    launch: Launch
    evaluated: int
    elapsed_s: float
    files: dict[str, str] = field(default_factory=dict)


def search_video(
    model_name: str, hw: HardwareProfile, work: VideoWorkload, out: str | None, keep_quality: bool = False
) -> VideoSearchOutcome:
    start = time.perf_counter()
    model = load_video_model(model_name)
    work = check(work).resolved(model)
    result = search(model, work, hw, keep_quality)
    best = result.ranked[0]
    default = evaluate(engine_default(model, work, hw), model, work, hw)
    exact = same_quality_best(result) if keep_quality else same_quality_best(search(model, work, hw, True))
    launch = emit.build_launch(best.plan, model, hw, violations(best.plan, model, work, hw))
    run_dir = Path(out) if out else Path("results") / f"{model.name}-{hw.name}-{time.strftime('%Y%m%d-%H%M%S')}"
    run_dir.mkdir(parents=True, exist_ok=True)
    doc = emit.best_document(model, hw, work, best, default, exact, launch)
    (run_dir / rundir.BEST).write_text(yaml.safe_dump(doc, sort_keys=False, width=120))
    text = report.markdown(model, hw, work, result, best, default, exact, format_launch(launch))
    (run_dir / rundir.REPORT_MD).write_text(text)
    summary = {k: doc[k] for k in ("model", "workload", "best", "engine_default", "best_exact")}
    (run_dir / rundir.SUMMARY).write_text(json.dumps(summary, indent=2, default=str))
    files = {"best": str(run_dir / rundir.BEST), "report": str(run_dir / rundir.REPORT_MD)}
    return VideoSearchOutcome(
        run_dir, best, default, exact, launch, result.evaluated, time.perf_counter() - start, files
    )


def is_video_best(path: str) -> bool:
    try:  # bounded, UTF-8-checked read: `serve /dev/zero` must not read forever before the LLM path says why
        doc = read_document(path)
    except MiTuneError:
        return False  # the LLM path reads it again and names what is wrong
    return doc.get("schema") == emit.SCHEMA


def video_serve_launch(best_path: str, host: str | None, port: int | None) -> Launch:
    """The launch rebuilt from the plan, model, workload and hardware recorded in a video best.yaml (never its
    argv), with the rules checked again."""
    doc = read_document(best_path)
    try:
        model = load_video_model(doc["model"]["name"])
        hw = from_dict(HardwareProfile, doc["hardware"]["profile"], f"{best_path}: hardware.profile")
        work = from_dict(VideoWorkload, doc["workload"], f"{best_path}: workload")
        plan = from_dict(VideoPlan, doc["best"]["plan"], f"{best_path}: best.plan")
    except (KeyError, TypeError):
        raise SpecError(f"{best_path}: expected model.name, hardware.profile, workload and best.plan") from None
    if plan.gpus > hw.num_gpus:
        raise MiTuneError(f"{best_path}: plan uses {plan.gpus} GPUs, the profile has {hw.num_gpus}")
    return emit.build_launch(
        plan, model, hw, violations(plan, model, work, hw), host or "127.0.0.1", 8000 if port is None else port
    )
