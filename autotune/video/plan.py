"""A video serving plan: how one SGLang Diffusion server splits the box (search dimensions, declared once here and in
SPACE; perf, rules, emitter and report read the same fields)."""

from __future__ import annotations

from dataclasses import dataclass

# Each searched dimension and the values it takes (search.py enumerates them; tests/video check that each one
# changes the prediction). gpus per replica = tp * ulysses * ring * cfg.
SPACE = {
    "replicas": "box GPUs // gpus per replica (--dp-size: round-robin replicas, runtime/scheduler_client.py:129-135)",
    "tp": (1, 2, 4, 8),
    "ulysses": (1, 2, 4, 8),
    "ring": (1, 2, 4, 8),
    "cfg": (1, 2),
    "attention": "rules.attention_backends(cc)",
    "cache_dit": (False, True),
    "dit_offload": (False, True),
    "text_encoder_offload": (False, True),
}


@dataclass(frozen=True)
class VideoPlan:
    replicas: int = 1
    tp: int = 1
    ulysses: int = 1
    ring: int = 1
    cfg: int = 1  # CFG-parallel degree: 2 puts the two guidance branches on two GPU groups
    attention: str = "fa"
    attention_config: str = ""  # --attention-backend-config (sparse density)
    density: float = 1.0  # share of attention blocks computed
    cache_dit: bool = False  # SGLANG_CACHE_DIT_ENABLED=true (envs.py:73)
    dit_offload: bool = False  # --dit-layerwise-offload: stream DiT layers from host memory
    text_encoder_offload: bool = False  # --text-encoder-cpu-offload: encoder weights in host memory between requests

    @property
    def gpus_per_replica(self) -> int:
        return self.tp * self.ulysses * self.ring * self.cfg

    @property
    def gpus(self) -> int:
        return self.gpus_per_replica * self.replicas

    @property
    def sp(self) -> int:
        return self.ulysses * self.ring

    def split(self) -> str:
        parts = [f"{name}{v}" for name, v in (("cfg", self.cfg), ("tp", self.tp), ("ulysses", self.ulysses),
                                              ("ring", self.ring)) if v > 1]  # fmt: skip
        return "x".join(parts) or "1 GPU"

    def label(self) -> str:
        att = self.attention + (f"({self.attention_config})" if self.attention_config else "")
        extras = [att] + (["cache-dit"] if self.cache_dit else []) + (["dit-offload"] if self.dit_offload else [])
        extras += ["te-offload"] if self.text_encoder_offload else []
        return f"{self.replicas}x[{self.split()}] {' '.join(extras)}"
