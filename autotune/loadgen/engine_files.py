"""The engines' own bench clients' results as a BenchReport (`mi-tune bench --from-file`).

- vLLM 0.34 `vllm bench serve --save-result`: one JSON object with per-request lists (input_lens, output_lens,
  ttfts, itls, latencies, errors: vllm/benchmarks/serve.py:1318-1340) and the run's settings (model_id,
  max_concurrency: serve.py:2304-2330). Recomputed from the per-request lists, so the figures are defined exactly
  as `mi-tune bench` defines them and goodput can be taken against any SLO.
- SGLang 0.5.23 `python -m sglang.bench_serving --output-file F`: JSON Lines, one line appended per run
  (sglang/benchmark/serving.py:1961-1966); the last line is read. With `--output-details` a line carries the
  per-request lists (input_lens, output_lens, ttfts, itls, errors: serving.py:1945-1952; no end-to-end latency,
  so E2E = TTFT + the sum of the request's ITLs) and is recomputed; without, the line's own aggregates are used
  (mean/median/p90/p95/p99 of TTFT, TPOT, ITL, E2E: serving.py:1880-1902) and goodput is unknown.
"""

from __future__ import annotations

import json
from pathlib import Path

from autotune.loadgen.metrics import BenchReport, Sample, summarize_samples
from autotune.specs.errors import MiTuneError
from autotune.specs.io import read_text

VLLM = "vllm bench serve"
SGLANG = "sglang bench_serving"


def read_result(path: str | Path, slo_ttft_ms: float = 0.0, slo_tpot_ms: float = 0.0) -> BenchReport:
    doc = _load(Path(path))
    if "mean_e2el_ms" in doc or "latencies" in doc:
        return _vllm(doc, path, slo_ttft_ms, slo_tpot_ms)
    if "mean_e2e_latency_ms" in doc or "total_throughput" in doc:
        return _sglang(doc, path, slo_ttft_ms, slo_tpot_ms)
    raise MiTuneError(
        f"--from-file {path}: neither a `vllm bench serve --save-result` JSON nor a SGLang bench_serving JSONL line"
    )


def _load(path: Path) -> dict:
    text = read_text(path, 256 * 2**20, "--from-file")  # bounded: per-request arrays of 1M requests fit
    try:
        doc = json.loads(text)
    except ValueError:
        lines = [line for line in text.splitlines() if line.strip()]
        try:
            doc = json.loads(lines[-1]) if lines else None
        except ValueError:
            doc = None
    if not isinstance(doc, dict):
        raise MiTuneError(f"--from-file {path}: expected a JSON object (or JSON Lines of objects)")
    return doc


def _lists(doc: dict, path, names: tuple[str, ...]) -> list[list]:
    lists = [doc.get(n) for n in names]
    if any(not isinstance(v, list) for v in lists) or len({len(v) for v in lists}) != 1:
        raise MiTuneError(f"--from-file {path}: expected per-request lists {', '.join(names)} of one length")
    return lists


def _vllm(doc: dict, path, slo_ttft_ms: float, slo_tpot_ms: float) -> BenchReport:
    n = len(doc.get("ttfts") or [])
    errors = doc.get("errors") or [""] * n
    ins, outs, ttfts, itls, lats, errors = _lists(
        {**doc, "errors": errors}, path, ("input_lens", "output_lens", "ttfts", "itls", "latencies", "errors")
    )
    samples, failed, messages = [], 0, []
    for i in range(n):
        if errors[i] or not outs[i]:  # serve.py:665-668: a failed request has output length 0
            failed += 1
            messages.append(str(errors[i] or "no output"))
            continue
        samples.append(Sample(int(ins[i]), int(outs[i]), float(ttfts[i]), float(lats[i]), tuple(itls[i] or ())))
    return summarize_samples(
        samples,
        failed=failed,
        duration_s=float(doc.get("duration") or 0.0),
        source=VLLM,
        model=str(doc.get("model_id") or ""),
        slo_ttft_ms=slo_ttft_ms,
        slo_tpot_ms=slo_tpot_ms,
        concurrency=int(doc.get("max_concurrency") or 0),
        errors=messages,
    )


def _sglang(doc: dict, path, slo_ttft_ms: float, slo_tpot_ms: float) -> BenchReport:
    duration = float(doc.get("duration") or 0.0)
    info = doc.get("server_info")
    model = str(info.get("model_path") or "") if isinstance(info, dict) else ""
    concurrency = int(doc.get("max_concurrency") or 0)
    if "ttfts" in doc:
        n = len(doc["ttfts"] or [])
        errors = doc.get("errors") or [""] * n
        ins, outs, ttfts, itls, errors = _lists(
            {**doc, "errors": errors}, path, ("input_lens", "output_lens", "ttfts", "itls", "errors")
        )
        samples, failed, messages = [], 0, []
        for i in range(n):
            if errors[i] or not outs[i]:
                failed += 1
                messages.append(str(errors[i] or "no output"))
                continue
            gaps = tuple(float(x) for x in itls[i] or ())
            samples.append(Sample(int(ins[i]), int(outs[i]), float(ttfts[i]), float(ttfts[i]) + sum(gaps), gaps))
        return summarize_samples(
            samples,
            failed=failed,
            duration_s=duration,
            source=SGLANG,
            model=model,
            slo_ttft_ms=slo_ttft_ms,
            slo_tpot_ms=slo_tpot_ms,
            concurrency=concurrency,
            errors=messages,
        )

    def stats(metric: str) -> dict[str, float]:
        keys = {"mean": f"mean_{metric}_ms", "p50": f"median_{metric}_ms"}
        keys.update({f"p{p}": f"p{p}_{metric}_ms" for p in (90, 95, 99)})
        return {k: float(doc[v]) for k, v in keys.items() if doc.get(v) is not None}

    completed = int(doc.get("completed") or 0)
    input_tok_s = float(doc.get("input_throughput") or 0.0)
    output_tok_s = float(doc.get("output_throughput") or 0.0)
    return BenchReport(
        source=SGLANG,
        model=model,
        num_requests=completed,
        completed=completed,
        failed=0,  # the aggregate line does not count failures
        duration_s=duration,
        input_tok_s=input_tok_s,
        output_tok_s=output_tok_s,
        total_tok_s=float(doc.get("total_throughput") or input_tok_s + output_tok_s),
        request_rate_rps=float(doc.get("request_throughput") or 0.0),
        ttft_ms=stats("ttft"),
        tpot_ms=stats("tpot"),
        itl_ms=stats("itl"),
        e2e_ms=stats("e2e_latency"),
        slo_ttft_ms=slo_ttft_ms,
        slo_tpot_ms=slo_tpot_ms,
        goodput_rps=None,
        goodput_tok_s=None,
        concurrency=concurrency,
    )
