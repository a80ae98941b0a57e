"""The video workload: what each request asks for and how requests arrive; the metrics it is judged on.

A file is YAML with schema mi-tune/video-workload/v1 and the fields of VideoWorkload; flags override it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from autotune.specs import SpecError
from autotune.specs.io import read_document
from autotune.video.catalog import DiTSpec

SCHEMA = "mi-tune/video-workload/v1"
OBJECTIVES = ("throughput", "latency")


@dataclass(frozen=True)
class VideoWorkload:
    width: int = 1280
    height: int = 720
    frames: int = 81
    steps: int = 0  # 0 = the model's default
    guidance: float = -1.0  # < 0 = the model's default; > 1 runs classifier-free guidance (two branches)
    videos_per_hour: float = 0.0  # open-loop Poisson arrivals; 0 = closed loop with `in_flight` requests
    in_flight: int = 0  # closed loop: requests kept outstanding (0 = one per instance)
    latency_slo_s: float = 0.0  # P95 latency per video the plan must keep (0 = none)
    objective: str = "throughput"  # throughput (videos/hour/GPU within the SLO) | latency (P95 latency)
    num_requests: int = 400  # requests the queueing simulation runs

    def resolved(self, model: DiTSpec) -> VideoWorkload:
        return dataclasses.replace(
            self,
            steps=self.steps or model.default_steps,
            guidance=model.default_guidance if self.guidance < 0 else self.guidance,
        )

    @property
    def cfg(self) -> bool:
        return self.guidance > 1.0

    def latent_tokens(self, model: DiTSpec) -> int:
        """Video tokens the DiT sees: latent frames x (h / stride / patch) x (w / stride / patch)."""
        vae, (pt, ph, pw) = model.vae, model.patch
        latent_frames = (self.frames - 1) // vae.temporal_stride + 1
        return (
            (latent_frames // pt) * (self.height // vae.spatial_stride // ph) * (self.width // vae.spatial_stride // pw)
        )

    def describe(self) -> str:
        load = (
            f"{self.videos_per_hour:g} videos/h (Poisson)"
            if self.videos_per_hour
            else f"{self.in_flight or 'one per instance'} in flight"
        )
        return (
            f"{self.width}x{self.height}, {self.frames} frames, {self.steps} steps, guidance {self.guidance:g}, {load}"
        )


def check(w: VideoWorkload, where: str = "flag") -> VideoWorkload:
    """One-line SpecError naming the flag/field when a value is out of range."""
    checks = (
        ("width", w.width >= 64 and w.width % 16 == 0, "a multiple of 16, >= 64"),
        ("height", w.height >= 64 and w.height % 16 == 0, "a multiple of 16, >= 64"),
        ("frames", w.frames >= 1 and (w.frames - 1) % 4 == 0, "4k+1 frames (the VAE's temporal stride), e.g. 81"),
        ("steps", 0 <= w.steps <= 1000, "0 (model default) .. 1000"),
        ("videos_per_hour", w.videos_per_hour >= 0, ">= 0"),
        ("in_flight", 0 <= w.in_flight <= 4096, "0 .. 4096"),
        ("latency_slo_s", w.latency_slo_s >= 0, ">= 0 seconds"),
        ("objective", w.objective in OBJECTIVES, " | ".join(OBJECTIVES)),
        ("num_requests", 10 <= w.num_requests <= 100000, "10 .. 100000"),
    )
    for name, ok, expected in checks:
        if not ok:
            flag = f"--{name.replace('_', '-')}" if where == "flag" else f"{where}: {name}"
            raise SpecError(f"{flag}: expected {expected}, got {getattr(w, name)!r}")
    return w


def load_workload(path: str) -> VideoWorkload:
    doc = read_document(path)  # bounded, UTF-8 checked; names the file
    if doc.get("schema") != SCHEMA:
        raise SpecError(f"{path}: expected a mapping with schema: {SCHEMA}")
    known = {f.name: f.type for f in dataclasses.fields(VideoWorkload)}
    values = {}
    for key, value in doc.items():
        if key == "schema":
            continue
        if key not in known:
            raise SpecError(f"{path}: unknown field '{key}' (expected {', '.join(known)})")
        kind = {"int": int, "float": float, "str": str}[known[key]]
        if kind is int and (isinstance(value, bool) or not isinstance(value, int)):
            raise SpecError(f"{path}: {key}: expected an integer, got {value!r}")
        if kind is float and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise SpecError(f"{path}: {key}: expected a number, got {value!r}")
        values[key] = kind(value)
    return check(VideoWorkload(**values), path)
