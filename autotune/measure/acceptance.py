"""Speculative acceptance as the engine itself counted it during a bench, turned into the per-draft-token
acceptance the model takes (Workload.draft_acceptance; perf/oplist.speculation: k drafts verified per step advance
E = (1 - a^(k+1)) / (1 - a) tokens, the bonus token included).

The engines' Prometheus counters, read before and after the measured bench (their difference excludes the
warm-up):
- vLLM (on by default): `vllm:spec_decode_num_drafts_total` and `vllm:spec_decode_num_accepted_tokens_total`;
  its own mean acceptance length is 1 + accepted / drafts (vllm/v1/spec_decode/metrics.py:113-114, 229-231).
- SGLang (with --enable-metrics): per finished request it adds the request's generated tokens to
  `sglang:generation_tokens_total` and its verify passes to `sglang:spec_verify_calls_total`
  (sglang/srt/observability/metrics_collector.py:2109-2112); the first token comes from the prefill, so
  E = (generated - requests) / verify passes. Without the counters, its `sglang:spec_accept_length` gauge
  (generated tokens per sequence per decode step over the last logging interval,
  managers/scheduler_components/metrics_reporter.py:973) is used.
"""

from __future__ import annotations

import math
import urllib.error
import urllib.request

VLLM_DRAFTS = "vllm:spec_decode_num_drafts_total"
VLLM_ACCEPTED = "vllm:spec_decode_num_accepted_tokens_total"
SGLANG_GENERATED = "sglang:generation_tokens_total"
SGLANG_REQUESTS = "sglang:num_requests_total"
SGLANG_VERIFY = "sglang:spec_verify_calls_total"
SGLANG_ACCEPT_LENGTH = "sglang:spec_accept_length"
SCRAPE_TIMEOUT_S = 5.0
MAX_ACCEPTANCE = 0.99  # Workload.draft_acceptance is a share below 1: a run that accepted every draft reads 0.99


def parse_prometheus(text: str) -> dict[str, float]:
    """Metric name -> the sum of its samples over every label set, from Prometheus' text format. Comments and
    lines that are not `name[{labels}] value [timestamp]` are skipped."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if "{" in line:
            name, _, rest = line.partition("{")
            rest = rest.rpartition("}")[2]
        else:
            name, _, rest = line.partition(" ")
        fields = rest.split()
        if not name or not fields:
            continue
        try:
            value = float(fields[0])
        except ValueError:
            continue
        if math.isfinite(value):
            out[name.strip()] = out.get(name.strip(), 0.0) + value
    return out


def scrape(url: str, timeout_s: float = SCRAPE_TIMEOUT_S) -> dict[str, float]:
    """The endpoint's /metrics, parsed; empty when it has none (SGLang without --enable-metrics, a router)."""
    return parse_prometheus(metrics_text(url, timeout_s))


def metrics_text(url: str, timeout_s: float = SCRAPE_TIMEOUT_S) -> str:
    """The endpoint's /metrics as text; '' when it has none."""
    try:
        with urllib.request.urlopen(f"{url.rstrip('/')}/metrics", timeout=timeout_s) as resp:  # noqa: S310 (http URL of our own launch)
            return resp.read().decode("utf-8", "replace")
    except (urllib.error.URLError, OSError, ValueError):
        return ""


def tokens_per_step(before: dict[str, float], after: dict[str, float]) -> float | None:
    """Tokens a decoding sequence advanced per verify step over the bench (the bonus token included), from two
    scrapes; None when the engine counted no speculative step."""

    def delta(name: str) -> float:
        return after.get(name, 0.0) - before.get(name, 0.0)

    if delta(VLLM_DRAFTS) > 0:
        return 1.0 + delta(VLLM_ACCEPTED) / delta(VLLM_DRAFTS)
    if delta(SGLANG_VERIFY) > 0:
        return max(1.0, (delta(SGLANG_GENERATED) - delta(SGLANG_REQUESTS)) / delta(SGLANG_VERIFY))
    gauge = after.get(SGLANG_ACCEPT_LENGTH, 0.0)
    return gauge if gauge >= 1.0 else None


def draft_acceptance(tokens: float, draft_tokens: int) -> float:
    """The per-draft-token acceptance a with (1 - a^(k+1)) / (1 - a) = `tokens` at k = `draft_tokens` (the inverse
    of perf/oplist.speculation), in [0, MAX_ACCEPTANCE]; bisection, as E rises monotonically with a."""
    if draft_tokens <= 0 or tokens <= 1.0:
        return 0.0
    if tokens >= draft_tokens + 1:
        return MAX_ACCEPTANCE

    def advanced(a: float) -> float:
        return float(draft_tokens + 1) if a >= 1.0 else (1.0 - a ** (draft_tokens + 1)) / (1.0 - a)

    lo, hi = 0.0, MAX_ACCEPTANCE
    if advanced(hi) <= tokens:
        return MAX_ACCEPTANCE
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if advanced(mid) < tokens else (lo, mid)
    return round((lo + hi) / 2, 4)
