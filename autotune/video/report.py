"""The video report (Markdown): best plan vs the engine default, why it wins, the best exact plan beside a plan that
changes the output, and the explain table (Ulysses vs ring vs CFG-parallel splits, sparse vs dense attention)."""

from __future__ import annotations

import math

from autotune.specs import HardwareProfile
from autotune.video.catalog import DiTSpec, expert_steps
from autotune.video.search import Outcome, SearchResult, best_where
from autotune.video.workload import VideoWorkload


def _s(x: float) -> str:
    return "inf (overloaded)" if math.isinf(x) else f"{x:,.1f} s"


def _row(name: str, o: Outcome | None) -> str:
    if o is None:
        return f"| {name} | no feasible plan | | | | | |"
    c = o.cost
    return (
        f"| {name} | {o.plan.label()} | {c.latency_s:,.1f} s | {_s(o.p95_s)} | {o.videos_per_hour:,.2f} | "
        f"{o.videos_per_hour_per_gpu:,.3f} | {'exact' if o.exact else '; '.join(o.changes)}"
        f"{'' if c.fits else '; DOES NOT FIT: ' + c.why_not} |"
    )


HEAD = (
    "| plan | layout | latency per video | P95 latency | videos/hour | videos/hour/GPU | output |\n"
    "|---|---|---|---|---|---|---|"
)


def explain_rows(result: SearchResult, default: Outcome) -> list[tuple[str, Outcome | None]]:
    """Best plan of each split of one video over all GPUs, with dense (fa) and quantised (sage_attn) attention and
    no cache reuse, then replicas side by side and dense vs sparse attention. A split whose rules refuse it on this
    box (e.g. ring with fa on SM12x) shows 'no feasible plan'."""
    splits = (
        ("Ulysses", dict(ulysses=lambda v: v > 1, ring=1, cfg=1, tp=1)),
        ("ring", dict(ring=lambda v: v > 1, ulysses=1, cfg=1, tp=1)),
        ("CFG-parallel x Ulysses", dict(cfg=2, ulysses=lambda v: v > 1, ring=1, tp=1)),
        ("CFG-parallel x ring", dict(cfg=2, ring=lambda v: v > 1, ulysses=1, tp=1)),
        ("CFG-parallel x Ulysses x ring", dict(cfg=2, ring=lambda v: v > 1, ulysses=lambda v: v > 1, tp=1)),
        ("tensor parallel (+ any SP/CFG)", dict(tp=lambda v: v > 1)),
    )
    rows: list[tuple[str, Outcome | None]] = [("engine default", default)]
    for attention in ("fa", "sage_attn"):
        for name, fields in splits:
            found = best_where(result, replicas=1, attention=attention, cache_dit=False, **fields)
            rows.append((f"1 video on all GPUs, {name}, {attention}", found))
    quantised = ("sage_attn", "fp8_fa_sm120")
    rows += [
        ("replicas side by side, dense fa", best_where(result, replicas=lambda v: v > 1, attention="fa", cache_dit=0)),
        ("dense attention (fa), best", best_where(result, attention="fa", cache_dit=False)),
        ("quantised attention (sage / fp8), best", best_where(result, attention=quantised.__contains__, cache_dit=0)),
        ("sparse attention (VSA / Sparge), best", best_where(result, density=lambda d: d < 1, cache_dit=False)),
        ("cache-dit on dense fa, best", best_where(result, cache_dit=True, attention="fa")),
    ]  # fmt: skip
    return rows


def why_wins(best: Outcome, default: Outcome) -> list[str]:
    lines = []
    b, d = best.plan, default.plan
    if (b.replicas, b.split()) != (d.replicas, d.split()):
        lines.append(
            f"layout {b.replicas}x[{b.split()}] instead of {d.replicas}x[{d.split()}]: per DiT forward on one GPU "
            + ", ".join(f"{k} {v:.2f} s" for k, v in best.cost.forward_s.items())
            + " vs the default's "
            + ", ".join(f"{k} {v:.2f} s" for k, v in default.cost.forward_s.items())
        )
    if b.attention != d.attention:
        lines.append(f"attention {b.attention} instead of {d.attention}")
    if b.cache_dit:
        lines.append(
            f"cache-dit: {best.cost.forwards:.0f} DiT forwards per GPU per video (some cached) vs "
            f"{default.cost.forwards:.0f}"
        )
    if b.dit_offload != d.dit_offload:
        lines.append(
            f"DiT layerwise offload {'on' if b.dit_offload else 'off'} (default: {'on' if d.dit_offload else 'off'})"
        )
    return lines


def markdown(
    model: DiTSpec, hw: HardwareProfile, work: VideoWorkload, result: SearchResult, best: Outcome, default: Outcome,
    exact: Outcome | None, launch_line: str,
) -> str:  # fmt: skip
    speed = default.cost.latency_s / best.cost.latency_s
    tput = best.videos_per_hour_per_gpu / default.videos_per_hour_per_gpu if default.videos_per_hour_per_gpu else 0
    lines = [
        f"# {model.name} on {hw.name}: SGLang Diffusion 0.5.23",
        "",
        f"Workload: {work.describe()}; {work.latent_tokens(model):,} video tokens per DiT forward; "
        f"experts by step {expert_steps(model, work.steps)}; objective {work.objective}"
        + (f", P95 latency SLO {work.latency_slo_s:g} s" if work.latency_slo_s else "")
        + ".",
        f"Model: DiT {model.dit_params / 1e9:.2f}B x {model.experts} expert(s) "
        f"(published {model.published_total_params / 1e9:g}B: "
        f"{model.published_source}); text encoder {model.text_encoder.name} {model.text_encoder.params / 1e9:.2f}B.",
        "",
        "## Best plan vs the engine default",
        "",
        HEAD,
        _row("best", best),
        _row("engine default (`sglang serve --num-gpus N`)", default),
        _row("best that keeps the output exact", exact),
        _row(
            "fastest single video (lowest P95)", min(result.ranked, key=lambda o: (o.p95_s, -o.score(work.objective)))
        ),
        _row(
            "fastest single video, exact",
            min((o for o in result.ranked if o.exact), key=lambda o: o.p95_s, default=None),
        ),
        "",
        f"Best vs default: {best.cost.latency_s:,.1f} s vs {default.cost.latency_s:,.1f} s per video (x{speed:.2f} "
        f"the default's speed), {best.videos_per_hour_per_gpu:.3f} vs {default.videos_per_hour_per_gpu:.3f} "
        f"videos/hour/GPU (x{tput:.2f}).",
        "",
        "Why it wins:",
        *[f"- {line}" for line in why_wins(best, default)],
        "",
    ]
    if not best.exact:
        lines += [
            f"**The best plan changes the output** ({'; '.join(best.changes)}): like a numerics change for LLMs. "
            "The best exact plan is in the table above; `--keep-quality` searches only exact plans.",
            "",
        ]
    c = best.cost
    lines += [
        f"Per video (best): text encode {c.text_s:.2f} s, denoise {c.denoise_s:,.1f} s ({c.forwards:.0f} DiT forwards "
        f"per GPU), VAE decode {c.vae_s:.1f} s, request overhead {c.overhead_s:.1f} s; peak memory "
        f"{c.memory_gib:.0f} GiB per GPU.",
        "",
        "## Explain: splits and attention on this box",
        "",
        HEAD,
        *[_row(name, o) for name, o in explain_rows(result, default)],
        "",
        f"Searched {result.evaluated} plans: {len(result.ranked)} feasible, {result.unfit} over memory, "
        f"{sum(result.refused.values())} refused by SGLang Diffusion rules:",
        *[f"- {n} plans: {rule}" for rule, n in sorted(result.refused.items(), key=lambda kv: -kv[1])],
        "",
        "Figures are predictions of the performance model (autotune/video/perf.py). Rates and their provenance:",
        *[f"- {k}: {v}" for k, v in c.provenance.items()],
        "",
        "## Launch",
        "",
        "```",
        launch_line,
        "```",
        "",
    ]
    return "\n".join(lines)
