"""Every bad input exits 2 with one line on stderr, `mi-tune: error: ...`, naming the flag or file and what was
expected; no traceback. Each row runs the real CLI (autotune.cli.run) on one bad input."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from autotune import catalog
from autotune.catalog import load_model, load_preset
from autotune.catalog.models import CATALOG
from autotune.cli import app, run
from autotune.specs import HardwareProfile, ModelSpec, Plan, Workload, ranges, to_dict
from autotune.validate import FLAGS

MODEL = ["--model", "llama-3.1-70b", "--preset", "rtx-pro-6000-x8"]
SEARCH = ["search", *MODEL, "--trials", "8"]
SPACE_HEAD = (
    "schema: mi-tune/space/v1\nname: bad\ndimensions:\n"
    "  - {name: engine, scope: deployment, field: engine, choices: [sglang, vllm]}\n"
    "  - {name: mode, scope: deployment, field: mode, choices: [aggregated]}\n"
)
TP = "  - {name: tp, field: tp, choices: [1, 2, 4, 8]}\n"
BENCH = ["bench", "--url", "http://127.0.0.1:1", "--concurrency", "1"]  # nothing listens on port 1
TUNE = ["kernels", "tune-moe", "--model", "qwen3-235b-a22b", "--preset", "l40s-x8", "--dry-run"]
WORKLOAD = "schema: mi-tune/workload/v1\nisl: 1024\nosl: 256\n"
PLAN = "schema: mi-tune/plan/v1\nengine: vllm\nmode: aggregated\nphases:\n  both: {gpus: [0,1,2,3,4,5,6,7], tp: 8}\n"


def _hardware(tmp: Path, change) -> str:
    """The l40s-x8 preset written as a profile file, with one change."""
    doc = to_dict(load_preset("l40s-x8"))
    for derived in ("interconnect", "fingerprint"):
        doc.pop(derived)
    change(doc)
    path = tmp / "box.yaml"
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def _config(tmp: Path, **change) -> str:
    """llama-3.1-70b's config.json with some keys changed (None: removed)."""
    doc = json.loads((Path(catalog.__file__).parent / "models" / "llama-3.1-70b.json").read_text())
    doc.update(change)
    return _file(tmp, "config.json", json.dumps({k: v for k, v in doc.items() if v is not None}))


def _file(tmp: Path, name: str, text: str) -> str:
    path = tmp / name
    path.write_text(text)
    return str(path)


def _plan_with(tmp: Path, setting: str) -> str:
    """The TP8 plan with one more phase setting (flow YAML)."""
    return _file(tmp, "p.yaml", PLAN.replace("tp: 8}", f"tp: 8, {setting}}}"))


def _space(tmp: Path, text: str) -> str:
    return _file(tmp, "space.yaml", SPACE_HEAD + text)


def _plan_dir(tmp: Path) -> str:
    return _file(tmp, "plan.yaml", PLAN)


# (id, argv builder: tmp_path -> argv, a regex the single stderr line must match after "mi-tune: error: ")
CASES = [
    # --out: the run directory
    ("out-is-a-file", lambda t: [*SEARCH, "--out", _file(t, "f", "")], r"--out .*/f: expected a directory"),
    (
        "out-under-a-file",
        lambda t: [*SEARCH, "--out", _file(t, "f", "") + "/run"],
        r"--out .*/f/run: cannot be created",
    ),
    # --storage: the study storage (search/storage.py)
    ("storage-unknown-scheme", lambda t: [*SEARCH, "--storage", "bogus://x"], r"--storage: unknown scheme 'bogus'"),
    ("storage-unparseable", lambda t: [*SEARCH, "--storage", "::::"], r"--storage: expected sqlite:///PATH"),
    # no PostgreSQL server on port 1; without the psycopg driver the message says to install it instead
    (
        "storage-postgresql-unreachable",
        lambda t: [*SEARCH, "--storage", "postgresql://u@127.0.0.1:1/db"],
        r"--storage: (cannot open|.*psycopg)",
    ),
    pytest.param(
        "storage-file-under-a-file",
        lambda t: [*SEARCH, "--storage", f"sqlite:///{_file(t, 'f', '')}/study.db"],
        r"--storage",
    ),
    # --space: the search-space file
    (
        "space-negative-max-running",
        lambda t: [
            *SEARCH,
            "--space",
            _space(t, TP + "  - {name: max_running, field: batching.max_running, choices: [-16]}\n"),
        ],
        r"space\.yaml: max_running: expected 1\.\.1,048,576 requests, got -16",
    ),
    (
        "space-choice-of-the-wrong-type",
        lambda t: [
            *SEARCH,
            "--space",
            _space(t, TP + "  - {name: max_running, field: batching.max_running, choices: [abc]}\n"),
        ],
        r"space\.yaml: max_running: expected an integer, got 'abc'",
    ),
    (
        "space-zero-tp",
        lambda t: [*SEARCH, "--space", _space(t, "  - {name: tp, field: tp, choices: [1, 0]}\n")],
        r"space\.yaml: tp: expected a positive integer, got 0",
    ),
    (
        "space-unknown-field",
        lambda t: [*SEARCH, "--space", _space(t, "  - {name: tp, field: tpx, choices: [1]}\n")],
        r"space\.yaml: tp: field: 'tpx' is not a plan field",
    ),
    (
        "space-unknown-dtype",
        lambda t: [*SEARCH, "--space", _space(t, TP + "  - {name: g, field: kernels.gemm_dtype, choices: [fp7]}\n")],
        r"space\.yaml: g: expected auto or one of .*got 'fp7'",
    ),
    (
        "space-unknown-allreduce",
        lambda t: [*SEARCH, "--space", _space(t, TP + "  - {name: ar, field: comm.allreduce, choices: [ring]}\n")],
        r"space\.yaml: ar: expected one of custom, nccl, pcie_ipc, got 'ring'",
    ),
    (
        "space-non-nccl-variable",
        lambda t: [*SEARCH, "--space", _space(t, TP + "  - {name: x, field: comm.nccl.LD_PRELOAD, choices: [a]}\n")],
        r"space\.yaml: x: field: expected comm\.nccl\.NCCL_<NAME>",
    ),
    (
        "space-bad-speculative",
        lambda t: [*SEARCH, "--space", _space(t, TP + "  - {name: s, field: speculative, choices: [mtp/x]}\n")],
        r"space\.yaml: s: expected 'none' or METHOD/K",
    ),
    (
        "space-unknown-engine",
        lambda t: [*SEARCH, "--space", _file(t, "space.yaml", SPACE_HEAD.replace("sglang, vllm", "sglang, trt") + TP)],
        r"space\.yaml: engine: expected one of vllm, sglang(, [a-z-]+)*, got 'trt'",
    ),
    (
        "space-unknown-key",
        lambda t: [*SEARCH, "--space", _space(t, "  - {name: tp, field: tp, choices: [1], x: 1}\n")],
        r"space\.yaml: dimensions\[2\]: unknown key 'x'",
    ),
    (
        "space-unknown-top-key",
        lambda t: [*SEARCH, "--space", _file(t, "s.yaml", "colour: red\n" + SPACE_HEAD + TP)],
        r"s\.yaml: unknown key 'colour'",
    ),
    ("space-duplicate", lambda t: [*SEARCH, "--space", _space(t, TP + TP)], r"space\.yaml: tp: declared twice"),
    (
        "space-unknown-requirement",
        lambda t: [*SEARCH, "--space", _space(t, "  - {name: tp, field: tp, choices: [1], requires: {feture: x}}\n")],
        r"space\.yaml: tp: requires: 'feture' is neither a fact",
    ),
    (
        "space-malformed-yaml",
        lambda t: [*SEARCH, "--space", _space(t, "  - {name: tp, choices: [1\n")],
        r"space\.yaml: malformed YAML",
    ),
    ("space-missing", lambda t: [*SEARCH, "--space", str(t / "nope.yaml")], r"nope\.yaml: file not found"),
    # workload and search flags
    (
        "negative-ttft",
        lambda t: [*SEARCH, "--ttft-ms", "-1"],
        r"--ttft-ms: expected 0\.\.86,400,000 ms \(0 = no SLO\), got -1",
    ),
    ("negative-tpot", lambda t: [*SEARCH, "--tpot-ms", "-5"], r"--tpot-ms: expected 0\.\..* ms .*got -5"),
    ("nan-ttft", lambda t: [*SEARCH, "--ttft-ms", "nan"], r"--ttft-ms: expected a finite number"),
    ("zero-timeout", lambda t: [*SEARCH, "--timeout", "0"], r"--timeout: expected 0 < x <= .* seconds"),
    ("negative-timeout", lambda t: [*SEARCH, "--timeout", "-3"], r"--timeout: expected 0 < x <= .*got -3"),
    (
        "timeout-before-the-first-trial",
        lambda t: [*SEARCH, "--timeout", "0.000001", "--quiet"],
        r"--timeout 1e-06: the search stopped before its first trial finished",
    ),
    (
        "isl-beyond-context",
        lambda t: [*SEARCH, "--isl", "200000"],
        r"--isl 200000 \+ --osl 1024 = 201024 tokens: more than llama-3\.1-70b's context of 131072",
    ),
    ("zero-isl", lambda t: [*SEARCH, "--isl", "0"], r"--isl: expected 1\.\.134,217,728 tokens, got 0"),
    ("zero-osl", lambda t: [*SEARCH, "--osl", "0"], r"--osl: expected 1\.\..* tokens, got 0"),
    ("isl-not-a-number", lambda t: [*SEARCH, "--isl", "abc"], r"'--isl'.*integer.*\(see 'mi-tune search --help'\)"),
    ("zero-trials", lambda t: [*SEARCH[:-2], "--trials", "0"], r"'--trials'"),
    ("more-gpus-than-the-box", lambda t: [*SEARCH, "--gpus", "9"], r"--gpus: expected 1\.\.8 for 'rtx-pro-6000-x8'"),
    (
        "negative-gpus",
        lambda t: [*SEARCH, "--gpus", "-1"],
        r"--gpus: expected 0\.\.4096 \(0 = every GPU of the box\), got -1",
    ),
    ("negative-concurrency", lambda t: [*SEARCH, "--concurrency", "-1"], r"--concurrency: expected 0\.\..*got -1"),
    ("negative-rate", lambda t: [*SEARCH, "--rate", "-1"], r"--rate: expected 0\.\..* requests/s"),
    ("rate-and-concurrency", lambda t: [*SEARCH, "--rate", "1", "--concurrency", "4"], r"not both"),
    ("negative-seed", lambda t: [*SEARCH, "--seed", "-1"], r"--seed: expected 0\.\.4,294,967,295, got -1"),
    ("zero-workers", lambda t: [*SEARCH, "--workers", "0"], r"'--workers'"),
    ("unknown-engine", lambda t: [*SEARCH, "--engine", "trt"], r"--engine: expected one of auto, vllm, sglang"),
    ("unknown-mode", lambda t: [*SEARCH, "--mode", "x"], r"--mode: expected one of"),
    ("unknown-objective", lambda t: [*SEARCH, "--objective", "speed"], r"objective: expected one of"),
    ("unknown-flag", lambda t: [*SEARCH, "--colour", "red"], r"No such option: --colour"),
    ("missing-model", lambda t: ["search"], r"Missing option '--model'"),
    # the simulator's workload flags and workload files (sim/workloads.py)
    ("negative-burst", lambda t: [*SEARCH, "--burst", "-1"], r"--burst: expected 0\.\..*got -1"),
    ("negative-isl-std", lambda t: [*SEARCH, "--isl-std", "-1", "--length-dist", "normal"], r"--isl-std: expected 0"),
    (
        "nan-osl-std",
        lambda t: [*SEARCH, "--osl-std", "nan", "--length-dist", "normal"],
        r"--osl-std: expected a finite",
    ),
    (
        "prefix-hit-rate-above-1",
        lambda t: [*SEARCH, "--prefix-hit-rate", "1.5"],
        r"--prefix-hit-rate: expected 0 <= x < 1 \(a share of the prompt\), got 1\.5",
    ),
    ("zero-num-requests", lambda t: [*SEARCH, "--num-requests", "0"], r"--num-requests: expected 1\.\..*got 0"),
    (
        "slo-percentile-100",
        lambda t: [*SEARCH, "--slo-percentile", "100"],
        r"--slo-percentile: expected 0 < x < 100 \(a percentile\), got 100",
    ),
    ("slo-percentile-0", lambda t: [*SEARCH, "--slo-percentile", "0"], r"--slo-percentile: expected 0 < x < 100"),
    (
        "draft-acceptance-1",
        lambda t: [*SEARCH, "--draft-acceptance", "1"],
        r"--draft-acceptance: expected 0 <= x < 1 \(a per-draft-token acceptance",
    ),
    (
        "expert-load-cv-negative",
        lambda t: [*SEARCH, "--expert-load-cv", "-0.5"],
        r"--expert-load-cv: expected 0\.\.32 \(an expert-popularity CV",
    ),
    (
        "expert-load-cv-nan",
        lambda t: [*SEARCH, "--expert-load-cv", "nan"],
        r"--expert-load-cv: expected a finite number in 0\.\.32",
    ),
    (
        "workload-file-expert-load-cv",
        lambda t: [*SEARCH, "--workload", _file(t, "w.yaml", WORKLOAD + "expert_load_cv: 40\n")],
        r"w\.yaml: expert_load_cv: expected 0\.\.32 \(an expert-popularity CV",
    ),
    ("unknown-length-dist", lambda t: [*SEARCH, "--length-dist", "zipf"], r"length_dist: expected one of fixed"),
    ("unknown-dataset", lambda t: [*SEARCH, "--dataset", "nope"], r"--dataset: expected one of"),
    ("burst-and-concurrency", lambda t: [*SEARCH, "--burst", "4", "--concurrency", "3"], r"give one"),
    ("workload-file-missing", lambda t: [*SEARCH, "--workload", str(t / "w.yaml")], r"w\.yaml: file not found"),
    (
        "workload-file-negative-slo",
        lambda t: [*SEARCH, "--workload", _file(t, "w.yaml", WORKLOAD + "ttft_ms: -5\n")],
        r"w\.yaml: ttft_ms: expected 0\.\..* ms \(0 = no SLO\), got -5",
    ),
    (
        "workload-file-unknown-field",
        lambda t: [*SEARCH, "--workload", _file(t, "w.yaml", WORKLOAD + "colour: red\n")],
        r"w\.yaml: unknown field 'colour'",
    ),
    (
        "lengths-file-missing",
        lambda t: [*SEARCH, "--lengths-file", str(t / "l.csv")],
        r"l\.csv: lengths file not found",
    ),
    ("estimate-negative-burst", lambda t: ["estimate", _plan_dir(t), *MODEL, "--burst", "-2"], r"--burst: expected 0"),
    # model and hardware
    ("unknown-model", lambda t: ["search", "--model", "no-such-model"], r"unknown model 'no-such-model'"),
    ("unknown-preset", lambda t: [*SEARCH[:2], "llama-3.1-70b", "--preset", "nope"], r"unknown preset 'nope'"),
    ("malformed-config-json", lambda t: ["search", "--model", _file(t, "config.json", "{")], r"config\.json"),
    (
        "config-unknown-model-type",
        lambda t: [*SEARCH[:1], "--model", _config(t, model_type="nope")],
        r"config\.json: model_type 'nope' is not supported",
    ),
    (
        "config-wrong-type",
        lambda t: [*SEARCH[:1], "--model", _config(t, hidden_size="big")],
        r"config\.json: field 'hidden_size': expected an integer",
    ),
    (
        "config-no-context",
        lambda t: [*SEARCH[:1], "--model", _config(t, max_position_embeddings=0)],
        r"config\.json: field 'max_position_embeddings': expected 1\.\..* tokens, got 0",
    ),
    (
        "config-missing-field",
        lambda t: [*SEARCH[:1], "--model", _config(t, hidden_size=None)],
        r"config\.json: missing field 'hidden_size'",
    ),
    ("model-dir-without-config", lambda t: [*SEARCH[:1], "--model", str(t)], r"config\.json: file not found"),
    ("hardware-and-preset", lambda t: [*SEARCH, "--hardware", "x.yaml"], r"--hardware and --preset"),
    (
        "hardware-negative-memory",
        lambda t: [*SEARCH[:3], "--hardware", _hardware(t, lambda d: d["accelerators"][0].update(memory_gib=-48))],
        r"box\.yaml: accelerators\[0\]\.memory_gib: expected 0\.\.4096 GiB \(0 = unknown\), got -48",
    ),
    (
        "hardware-unknown-field",
        lambda t: [*SEARCH[:3], "--hardware", _hardware(t, lambda d: d["host"].update(colour="red"))],
        r"box\.yaml: host: unknown field 'colour'",
    ),
    (
        "hardware-wrong-type",
        lambda t: [*SEARCH[:3], "--hardware", _hardware(t, lambda d: d["accelerators"][0].update(memory_gib="lots"))],
        r"box\.yaml: accelerators\[0\]\.memory_gib: expected a number, got 'lots'",
    ),
    (
        "hardware-no-accelerators",
        lambda t: [*SEARCH[:3], "--hardware", _hardware(t, lambda d: d.update(accelerators=[], links=[], p2p=[]))],
        r"box\.yaml: accelerators: expected at least one",
    ),
    (
        "hardware-unknown-bandwidth",
        lambda t: [
            *SEARCH[:3],
            "--hardware",
            _hardware(t, lambda d: [a.update(mem_bw_gbs=0) for a in d["accelerators"]]),
        ],
        r"hardware 'l40s-x8': mem_bw_gbs of 'NVIDIA L40S' unknown",
    ),
    (
        "hardware-malformed",
        lambda t: [*SEARCH[:3], "--hardware", _file(t, "hw.yaml", "host: [\n")],
        r"hw\.yaml: malformed YAML",
    ),
    (
        "hardware-wrong-schema",
        lambda t: [*SEARCH[:3], "--hardware", _file(t, "hw.yaml", PLAN)],
        r"hw\.yaml: schema: expected 'mi-tune/hardware/v1'",
    ),
    # estimate: plan files
    ("plan-missing", lambda t: ["estimate", str(t / "p.yaml"), *MODEL], r"p\.yaml: file not found"),
    (
        "plan-unknown-field",
        lambda t: ["estimate", _file(t, "p.yaml", PLAN.replace("tp: 8", "tp: 8, colour: red")), *MODEL],
        r"p\.yaml: phases\.both: unknown field 'colour'",
    ),
    (
        "plan-wrong-type",
        lambda t: ["estimate", _file(t, "p.yaml", PLAN.replace("tp: 8", "tp: eight")), *MODEL],
        r"p\.yaml: phases\.both\.tp: expected an integer, got 'eight'",
    ),
    (
        "plan-negative-max-running",
        lambda t: [
            "estimate",
            _file(t, "p.yaml", PLAN.replace("tp: 8", "tp: 8, batching: {max_running: -16}")),
            *MODEL,
        ],
        r"p\.yaml: phases\.both\.batching\.max_running: expected 1\.\..* requests, got -16",
    ),
    (
        "plan-unknown-allreduce",
        lambda t: ["estimate", _file(t, "p.yaml", PLAN.replace("tp: 8", "tp: 8, comm: {allreduce: ring}")), *MODEL],
        r"p\.yaml: phases\.both\.comm\.allreduce: expected one of custom, nccl, pcie_ipc",
    ),
    (
        "plan-nccl-preload",
        lambda t: ["estimate", _plan_with(t, "comm: {nccl: {LD_PRELOAD: /tmp/x.so}}"), *MODEL],
        r"p\.yaml: phases\.both\.comm\.nccl: LD_PRELOAD='/tmp/x\.so' is not an NCCL variable",
    ),
    (
        "plan-unknown-speculative",
        lambda t: ["estimate", _plan_with(t, "speculative: {method: x, draft_tokens: 2}"), *MODEL],
        r"p\.yaml: phases\.both\.speculative\.method: expected one of none, mtp",
    ),
    (
        "plan-negative-gpu",
        lambda t: ["estimate", _file(t, "p.yaml", PLAN.replace("[0,1,2", "[-1,1,2")), *MODEL],
        r"p\.yaml: phases\.both\.gpus\[0\]: expected 0\.\.4095 \(GPU indices\), got -1",
    ),
    (
        "plan-gpu-beyond-the-box",
        lambda t: ["estimate", _file(t, "p.yaml", PLAN.replace(",7]", ",9]")), *MODEL],
        r"p\.yaml: cannot run: both: GPU 9 does not exist on 8-GPU",
    ),
    (
        "plan-kernel-the-engine-lacks",
        lambda t: ["estimate", _plan_with(t, "kernels: {attention: bogus}"), *MODEL],
        r"p\.yaml: cannot run: vllm .* cannot express attention bogus",
    ),
    (
        "plan-unknown-fusion",
        lambda t: ["estimate", _plan_with(t, "fusion: {bogus: true}"), *MODEL],
        r"p\.yaml: cannot run: vllm .* cannot express fusion 'bogus'",
    ),
    ("plan-names-no-model", lambda t: ["estimate", _plan_dir(t), "--preset", "rtx-pro-6000-x8"], r"names no model"),
    (
        "estimate-isl-beyond-context",
        lambda t: ["estimate", _plan_dir(t), *MODEL, "--isl", "131072"],
        r"--isl 131072 \+ --osl 1024 = 132096 tokens: more than",
    ),
    ("estimate-negative-ttft", lambda t: ["estimate", _plan_dir(t), *MODEL, "--ttft-ms", "-1"], r"--ttft-ms"),
    # the other commands' numeric flags
    (
        "search-negative-measure",
        lambda t: [*SEARCH, "--measure", "-1"],
        r"--measure: expected 0\.\.1000 plans \(0 = no measuring\), got -1",
    ),
    (
        "search-measure-port-zero",
        lambda t: [*SEARCH, "--measure", "1", "--measure-port", "0"],
        r"--measure-port: expected 1\.\.65,535, got 0",
    ),
    ("bench-negative-burst", lambda t: [*BENCH, "--burst", "-1"], r"--burst: expected 0\.\..*got -1"),
    (
        "bench-negative-requests",
        lambda t: [*BENCH, "--num-requests", "-1"],
        r"--num-requests: expected 0\.\..* \(0 = the workload's\), got -1",
    ),
    ("bench-zero-isl", lambda t: [*BENCH, "--isl", "0"], r"--isl: expected 1\.\..*got 0"),
    ("bench-negative-ttft", lambda t: [*BENCH, "--ttft-ms", "-1"], r"--ttft-ms: expected 0\.\..*got -1"),
    ("bench-negative-rate", lambda t: [*BENCH, "--rate", "-2"], r"--rate: expected 0\.\..*got -2"),
    ("bench-bad-url", lambda t: ["bench", "--url", "notaurl"], r"--url: expected http://HOST:PORT"),
    ("measure-zero-top", lambda t: ["measure", str(t), "--top", "0"], r"--top: expected 1\.\.1000 plans, got 0"),
    ("measure-port-zero", lambda t: ["measure", str(t), "--port", "0"], r"--port: expected 1\.\.65535"),
    ("measure-negative-requests", lambda t: ["measure", str(t), "--num-requests", "-1"], r"--num-requests: expected 0"),
    (
        "measure-zero-ready-timeout",
        lambda t: ["measure", str(t), "--ready-timeout", "0"],
        r"--ready-timeout: expected 0 < x <= .* seconds, got 0",
    ),
    ("measure-not-a-run-dir", lambda t: ["measure", str(t)], r"no best\.yaml"),
    ("tune-moe-zero-tp", lambda t: [*TUNE, "--tp", "0"], r"--tp"),
    ("tune-moe-ep-not-dividing", lambda t: [*TUNE, "--tp", "2", "--ep", "3"], r"--tp/--ep: expected positive sizes"),
    (
        "tune-moe-zero-trials",
        lambda t: [*TUNE, "--tp", "2", "--trials", "0"],
        r"--trials: expected 1\.\..* configs per batch size, got 0",
    ),
    ("tune-moe-bad-batch-sizes", lambda t: [*TUNE, "--tp", "2", "--batch-sizes", "0,-4"], r"--batch-sizes: expected"),
    # serve, report, probe
    ("serve-missing-file", lambda t: ["serve", str(t / "best.yaml"), "--dry-run"], r"best\.yaml: file not found"),
    ("serve-a-plan-not-a-best", lambda t: ["serve", _plan_dir(t), "--dry-run"], r"plan\.yaml: schema: expected"),
    ("serve-port-zero", lambda t: ["serve", _plan_dir(t), "--dry-run", "--port", "0"], r"--port: expected 1\.\.65535"),
    ("serve-bad-host", lambda t: ["serve", _plan_dir(t), "--dry-run", "--host", "a b"], r"--host: expected a host"),
    ("report-missing-dir", lambda t: ["report", str(t / "nope")], r"nope"),
    (
        "probe-missing-sysfs-root",
        lambda t: ["probe", "--sysfs-root", str(t / "sys")],
        r"--sysfs-root .*: expected a dir",
    ),
    ("report-a-file", lambda t: ["report", _plan_dir(t)], r"plan\.yaml: expected a run directory"),
    ("report-a-dir-without-best", lambda t: ["report", str(t)], r"best\.yaml is missing"),
    ("serve-a-directory", lambda t: ["serve", str(t), "--dry-run"], r"cannot read \(Is a directory\)"),
    ("probe-out-a-directory", lambda t: ["probe", "--out", str(t)], r"--out .*: expected a file name, but it is a dir"),
    ("probe-out-under-a-file", lambda t: ["probe", "--out", _file(t, "f", "") + "/hw.yaml"], r"cannot be created"),
    # issue 18: numbers and files from outside (the classes of each are generated below)
    (
        "hardware-nan-bandwidth",
        lambda t: [
            *SEARCH[:3],
            "--hardware",
            _hardware(t, lambda d: d["accelerators"][0].update(mem_bw_gbs=float("nan"))),
        ],
        r"box\.yaml: accelerators\[0\]\.mem_bw_gbs: expected a finite number in 0\.\.100,000 GB/s .*, got nan",
    ),
    (
        "hardware-infinite-memory",
        lambda t: [
            *SEARCH[:3],
            "--hardware",
            _hardware(t, lambda d: d["accelerators"][0].update(memory_gib=float("inf"))),
        ],
        r"box\.yaml: accelerators\[0\]\.memory_gib: expected a finite number in 0\.\.4096 GiB",
    ),
    (
        "config-zero-heads",
        lambda t: [*SEARCH[:1], "--model", _config(t, num_attention_heads=0)],
        r"config\.json: field 'num_attention_heads': expected 1\.\.65,536, got 0",
    ),
    (
        "config-more-experts-per-token-than-experts",
        lambda t: [*SEARCH[:1], "--model", _moe_config(t, num_experts_per_tok=300)],
        r"config\.json: layers\[\d+\]\.ffn: experts_per_token: expected 1\.\.num_experts \(128\) .*got 300|"
        r"config\.json: experts_per_token: expected 1\.\.num_experts \(128\)",
    ),
    (
        "config-meta-not-a-mapping",
        lambda t: [*SEARCH[:1], "--model", _config(t, _mi_tune=5)],
        r"config\.json: _mi_tune: expected a mapping, got 5",
    ),
    (
        "space-tp-fits-no-gpu-count",
        lambda t: [*SEARCH, "--space", _space(t, "  - {name: tp, field: tp, choices: [3, 5, 7]}\n")],
        r"space\.yaml: tp: no layout of the choices \(tp \[3, 5, 7\]\) fits 8 GPUs",
    ),
    (
        "space-huge-chunk",
        lambda t: [
            *SEARCH,
            "--space",
            _space(t, TP + "  - {name: c, field: batching.chunked_prefill_tokens, choices: [1000000000000]}\n"),
        ],
        r"space\.yaml: c: expected 1\.\.134,217,728 tokens, got 1,000,000,000,000",
    ),
    ("serve-dev-zero", lambda t: ["serve", "/dev/zero", "--dry-run"], r"/dev/zero: expected a regular file"),
    (
        "serve-not-utf8",
        lambda t: ["serve", _bytes(t, "best.yaml", b"schema: mi-tune/best/v1\nengine: \xff\n"), "--dry-run"],
        r"best\.yaml: not UTF-8 text \(byte 0xff at offset 32\)",
    ),
    (
        "lengths-file-beyond-any-context",
        lambda t: [*SEARCH, "--lengths-file", _file(t, "l.csv", "input,output\n1000,10\n999999999999,10\n")],
        r"l\.csv:3: isl: expected 1\.\.134,217,728 tokens, got 999,999,999,999",
    ),
    ("out-under-sys", lambda t: [*SEARCH, "--out", "/sys/mi-tune-run"], r"--out /sys/mi-tune-run: cannot be created"),
    (
        "out-with-plots-a-file",
        lambda t: [*SEARCH, "--out", str(Path(_file(t, "plots", "")).parent)],
        r"--out .*: .*/plots is a file; the run writes its 'plots' folder there",
    ),
    (
        "report-with-plots-a-file",
        lambda t: ["report", str(Path(_file(t, "plots", "")).parent)],
        r"/plots is a file; the run writes its 'plots' folder there",
    ),
    ("search-measure-negative", lambda t: [*SEARCH, "--measure", "-1"], r"--measure: expected 0\.\.1000 plans"),
    (
        "tune-moe-device-name-traversal",
        lambda t: [*TUNE, "--tp", "2", "--device-name", "../../../X"],
        r"--device-name: expected a name .*got '\.\./\.\./\.\./X'",
    ),
]


def _bytes(tmp: Path, name: str, data: bytes) -> str:
    path = tmp / name
    path.write_bytes(data)
    return str(path)


def _moe_config(tmp: Path, **change) -> str:
    """qwen3-235b-a22b's config.json (128 routed experts) with some keys changed."""
    doc = json.loads((Path(catalog.__file__).parent / "models" / "qwen3-235b-a22b.json").read_text())
    doc.update(change)
    return _file(tmp, "config.json", json.dumps(doc))


def _param(case):
    """(id, argv, expected) rows, or a pytest.param of one with marks."""
    if hasattr(case, "marks"):
        return pytest.param(*case.values[1:], id=case.values[0], marks=case.marks)
    return pytest.param(*case[1:], id=case[0])


@pytest.mark.parametrize(("argv", "expected"), [_param(c) for c in CASES])
def test_bad_input_exits_2_with_one_line(argv, expected, tmp_path, capsys):
    args = argv(tmp_path)
    if args[0] == "search" and "--out" not in args:
        args += ["--out", str(tmp_path / "run")]
    code = run(args)
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.count("\n") == 1 and err.startswith("mi-tune: error: "), err
    assert "Traceback" not in err
    assert re.search(expected, err), err


def test_a_model_the_box_cannot_hold_says_so_with_the_arithmetic_before_any_trial(tmp_path, capsys):
    out = tmp_path / "run"
    argv = ["search", "--model", "llama-3.1-70b", "--preset", "l40s-x8", "--gpus", "1", "--keep-precision"]
    assert run([*argv, "--trials", "200", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    got = re.fullmatch(
        r"mi-tune: error: llama-3\.1-70b \(bf16\) needs ([\d.,]+) GB of weights and ([\d.]+) GB of KV for one "
        r"5,120-token request; 1 x ([\d.]+) GiB GPU holds at most 1 x ([\d.]+) = [\d.]+ GB .*: no plan fits",
        err,
    )
    assert got, err
    weights_gb, kv_gb, gpu_gb, usable_gb = (float(g.replace(",", "")) for g in got.groups())
    dense_b, expert_b = load_model("llama-3.1-70b").weight_bytes()  # the checkpoint's size, counted another way
    assert weights_gb == pytest.approx((dense_b + expert_b) / 1e9, rel=0.02)
    assert gpu_gb == load_preset("l40s-x8").gpu.memory_gib and usable_gb < gpu_gb * 2**30 / 1e9
    assert weights_gb + kv_gb > usable_gb
    assert not (out / "study.db").exists() and not list(out.glob("*.journal"))  # no trial ran


def test_fp8_is_counted_when_the_search_may_quantise(tmp_path, capsys):
    argv = ["search", "--model", "llama-3.1-70b", "--preset", "l40s-x8", "--gpus", "1", "--out", str(tmp_path / "r")]
    assert run(argv) == 2
    err = capsys.readouterr().err
    weights_gb = float(re.search(r"needs ([\d.,]+) GB of weights \(with FP8 weights", err).group(1))
    dense_b, expert_b = load_model("llama-3.1-70b").weight_bytes()
    assert weights_gb < 0.6 * (dense_b + expert_b) / 1e9  # FP8 GEMM weights halve the bf16 layers


def test_an_impossible_slo_says_what_is_achievable(tmp_path, capsys):
    argv = ["search", *MODEL, "--trials", "12", "--ttft-ms", "1", "--tpot-ms", "0.5", "--out", str(tmp_path / "r")]
    assert run(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    got = re.search(
        r"--ttft-ms 1: the lowest TTFT found is ([\d.,]+) ms at concurrency 1 \((.+?)\); "
        r"--tpot-ms 0\.5: the lowest TPOT found is ([\d.,]+) ms at concurrency 1",
        err,
    )
    assert got, err
    ttft_ms, tpot_ms = float(got.group(1).replace(",", "")), float(got.group(3).replace(",", ""))
    assert ttft_ms > 1 and tpot_ms > 0.5  # what is achievable misses the SLO, else a plan would have met it


# ---------------------------------------------------------------- rows generated by property (specs/ranges.py)
# One rule per class of input, applied to every member: each numeric field of each file kind, each numeric flag
# of each command, each name that becomes a path, each reader of a file. A new field or flag without a range
# fails test_every_numeric_field_and_flag_has_a_range; a new one with a range gets its rows here automatically.

NON_FINITE = (float("nan"), float("inf"), float("-inf"))


def _outside(rng: ranges.Range, integer: bool) -> list:
    """The values just outside a range: under its low end and over its high end."""
    low = rng.low if rng.open_low else rng.low - 1
    high = rng.high if rng.open_high else rng.high + 1
    return [int(low), int(high)] if integer else [float(low), float(high)]


def _leaves(doc, path: str = ""):
    """(where, value) of every number in a plain document, the first item of each list standing for the rest;
    `where` is spelled as the readers name it: 'accelerators[0].peak_tflops.bf16'."""
    if isinstance(doc, dict):
        for key, value in doc.items():
            yield from _leaves(value, f"{path}.{key}" if path else str(key))
    elif isinstance(doc, list) and doc:
        yield from _leaves(doc[0], f"{path}[0]")
    elif isinstance(doc, (int, float)) and not isinstance(doc, bool):
        yield path, doc


def _set(doc, where: str, value) -> None:
    parts = [int(p) if p.isdigit() else p for p in re.findall(r"[^.\[\]]+", where)]
    for part in parts[:-1]:
        doc = doc[part]
    doc[parts[-1]] = value


def _range_of(owner: type, where: str) -> ranges.Range | None:
    """The range of the field `where` (dotted, from the document root `owner`) in specs/ranges.py."""
    import typing

    names = [p for p in re.findall(r"[^.\[\]]+", where) if not p.isdigit()]
    cls, i = owner, 0
    while i < len(names):
        if names[i] not in {f.name for f in dataclasses.fields(cls)}:
            return None
        hint = typing.get_type_hints(cls)[names[i]]
        nested = [t for t in ranges._leaf_types(hint) if dataclasses.is_dataclass(t)]
        if not nested or i == len(names) - 1:
            return ranges.field_range(cls, names[i])
        cls, i = nested[0], i + (2 if typing.get_origin(hint) is dict else 1)  # a mapping's key is no field
    return None


def _file_rows(kind: str, owner: type, doc: dict) -> list:
    """(kind, where, bad value) rows: non-finite numbers for every float field, and values just outside the range
    of every numeric field (negative counts included), from a valid document of the kind."""
    rows = []
    for where, value in _leaves(doc):
        rng = _range_of(owner, where)
        assert rng is not None, f"{kind}: {where} has no range in specs/ranges.py"
        integer = isinstance(value, int)
        bad = _outside(rng, integer) + ([] if integer else list(NON_FINITE))
        rows += [pytest.param(kind, where, v, id=f"{kind}-{where}={v}") for v in bad]
    return rows


def _hardware_doc() -> dict:
    """The rtx-pro-6000-x8 preset with every optional numeric section filled (measured curves, corrections)."""
    doc = to_dict(load_preset("rtx-pro-6000-x8"))
    for derived in ("interconnect", "fingerprint"):
        doc.pop(derived)
    doc["measured"].update(gemm_tflops={"bf16": 400.0}, mem_bw_gbs=1500.0, p2p_gbs=[[0.0, 25.0]])
    doc["measured"].update(host_copy_gbs={"h2d/numa0/gpu0": 20.0})
    op = dict(op_class="gemm", dtype="bf16", bucket="m<=16", shape="m=16", time_us=10.0, tflops=1.0, gbs=100.0)
    doc["measured"]["ops"] = [op]
    doc["measured"]["collectives"] = {"all_reduce/8": doc["measured"]["collectives"]["all_reduce/8"][:1]}
    doc["corrections"] = {"gemm": 1.0}
    return doc


def _plan_doc() -> dict:
    doc = yaml.safe_load(PLAN)
    doc["phases"]["both"].update(batching={"max_running": 64, "chunked_prefill_tokens": 8192})
    doc["phases"]["both"]["speculative"] = {"method": "mtp", "draft_tokens": 2}
    return doc


def _workload_doc() -> dict:
    doc = to_dict(Workload())
    doc.update(ttft_percentile=95.0, burst=0)
    return doc


FILE_DOCS = {  # kind -> (root contract, a valid document, argv reading the file at PATH)
    "hardware": (HardwareProfile, _hardware_doc, lambda p: [*SEARCH[:3], "--hardware", p]),
    "plan": (Plan, _plan_doc, lambda p: ["estimate", p, *MODEL]),
    "workload": (Workload, _workload_doc, lambda p: [*SEARCH, "--workload", p]),
}
FILE_ROWS = [row for kind, (owner, doc, _) in FILE_DOCS.items() for row in _file_rows(kind, owner, doc())]


@pytest.mark.parametrize(("kind", "where", "value"), FILE_ROWS)
def test_every_numeric_field_of_every_file_kind_is_finite_and_in_range(kind, where, value, tmp_path, capsys):
    owner, make_doc, argv = FILE_DOCS[kind]
    doc = make_doc()
    _set(doc, where, value)
    path = tmp_path / f"{kind}.yaml"
    path.write_text(yaml.safe_dump(doc))
    args = argv(str(path))
    err = _fails(args + (["--out", str(tmp_path / "run")] if args[0] == "search" else []), capsys)
    # the file, the field as the file spells it, what was expected (a range, or the type) and the value
    assert f"{kind}.yaml: {where}: expected " in err, err
    rng = _range_of(owner, where)
    named = rng.describe() in err or "expected an integer" in err  # an int field given a float
    assert named and "got " in err, err


def _fails(argv: list[str], capsys) -> str:
    """Run the CLI; it must exit 2 with one line on stderr. Returns that line."""
    code = run(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.count("\n") == 1 and err.startswith("mi-tune: error: ") and "Traceback" not in err, err
    return err


# config.json: every key the adapters read through Fields.num whose range is declared, in the first catalog model
# that has it, just outside its range and as a float NaN (a negative count is the low side of most).
def _keys_read(path: Path) -> set[str]:
    """The config.json keys the model's adapter reads as counts (Fields.num / nums), recorded while it loads."""
    from unittest import mock

    from autotune.catalog.adapters.common import Fields
    from autotune.catalog.models import model_from_config

    read, num = set(), Fields.num

    def recording(self, key, *args):
        read.add(key)
        return num(self, key, *args)

    with mock.patch.object(Fields, "num", recording):
        model_from_config(path)
    return read


def _config_rows() -> list:
    rows, seen = [], set()
    for name in CATALOG:
        path = Path(catalog.__file__).parent / "models" / f"{name}.json"
        doc, read = json.loads(path.read_text()), _keys_read(path)
        for key, rng in ranges.CONFIG_KEYS.items():
            if key in seen or key not in read or not isinstance(doc.get(key), int):
                continue
            seen.add(key)
            rows += [pytest.param(name, key, v, id=f"{name}-{key}={v}") for v in [*_outside(rng, True), NON_FINITE[0]]]
    return rows


@pytest.mark.parametrize(("model", "key", "value"), _config_rows())
def test_every_config_json_count_is_in_range(model, key, value, tmp_path, capsys):
    doc = json.loads((Path(catalog.__file__).parent / "models" / f"{model}.json").read_text())
    doc[key] = value
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text(json.dumps(doc))
    err = _fails(
        ["search", "--model", str(tmp_path / "m"), "--preset", "l40s-x8", "--out", str(tmp_path / "r")], capsys
    )
    assert f"config.json: field '{key}': expected " in err and "got " in err, err


def test_the_config_json_keys_with_a_declared_range_cover_every_adapter_family():
    """Each adapter family's catalog config has its structural counts in CONFIG_KEYS (not the default rule)."""
    covered = {key for p in _config_rows() for key in [p.values[1]]}
    assert {"num_attention_heads", "n_routed_experts", "num_experts", "kv_lora_rank", "o_groups"} <= covered


# every numeric flag of every command: a range in validate.FLAGS, checked before any work under its own name
def _commands():
    """(command, subcommand, flag, is_float) of every int/float option, read from the command functions'
    signatures (stable across Typer releases, unlike its click objects)."""
    import inspect
    import typing

    import typer.models

    def options(typer_app, name=None):
        for info in typer_app.registered_commands:
            hints = typing.get_type_hints(info.callback)
            for pname, param in inspect.signature(info.callback).parameters.items():
                decls = getattr(param.default, "param_decls", None)
                tp = hints[pname]
                if isinstance(param.default, typer.models.OptionInfo) and tp in (int, float, int | None, float | None):
                    yield name or info.name or info.callback.__name__, decls[0], float in typing.get_args(tp) + (tp,)

    yield from options(app)
    for group in app.registered_groups:
        yield from options(group.typer_instance, group.name)


def _flag_range(command: str, flag: str) -> ranges.Range | None:
    return FLAGS.get(f"{command} {flag}") or FLAGS.get(flag)


FLAG_BASE = {  # argv each command needs besides the flag under test (tmp: the test's folder)
    "search": lambda t: [*SEARCH[:5], "--out", str(t / "run")],
    "estimate": lambda t: ["estimate", _plan_dir(t), *MODEL],
    "bench": lambda t: ["bench", "--url", "http://127.0.0.1:1"],
    "measure": lambda t: ["measure", str(t)],
    "serve": lambda t: ["serve", _plan_dir(t), "--dry-run"],
    "kernels": lambda t: TUNE[:-1],
}
FLAG_ROWS = [
    pytest.param(cmd, flag, v, id=f"{cmd}-{flag}={v}")
    for cmd, flag, is_float in _commands()
    if _flag_range(cmd, flag) is not None
    for v in _outside(_flag_range(cmd, flag), not is_float) + ([NON_FINITE[0], NON_FINITE[1]] if is_float else [])
]


def test_every_numeric_field_and_flag_has_a_range():
    """A numeric field of a file kind, or a numeric flag, without a range in specs/ranges.py / validate.FLAGS."""
    for owner in (HardwareProfile, Plan, Workload, ModelSpec):
        missing = [p for cls, name, p in ranges.numeric_fields(owner) if ranges.field_range(cls, name) is None]
        assert not missing, f"{owner.__name__}: no range for {missing}"
    flags = [f"{cmd} {flag}" for cmd, flag, _ in _commands() if _flag_range(cmd, flag) is None]
    assert not flags, f"numeric flags without a range in validate.FLAGS: {flags}"
    assert len(FLAG_ROWS) > 80


@pytest.mark.parametrize(("command", "flag", "value"), FLAG_ROWS)
def test_every_numeric_flag_is_checked_before_any_work_under_its_own_name(command, flag, value, tmp_path, capsys):
    argv = FLAG_BASE[command](tmp_path) + [flag, str(value)]
    if flag == "--measure-port":
        argv += ["--measure", "1"]
    err = _fails(argv, capsys)
    assert re.search(rf"{flag}\b", err), err  # named by its own flag (--trials' min=1 is click's: it names it too)
    assert not (tmp_path / "run").exists()  # before any work: no run directory


# names that become part of a path: refused where a file gives them, sanitised where mi-tune builds a path
TRAVERSALS = ["../../X", "..", ".", "a/b", "/etc/passwd", "..\\..\\X", "tab\there", "new\nline", "", "x" * 200]


def _name_argv(where: str, name: str, tmp: Path) -> list[str]:
    if where == "config":
        doc = json.loads((Path(catalog.__file__).parent / "models" / "llama-3.1-70b.json").read_text())
        doc["_mi_tune"]["name"] = name
        (tmp / "m").mkdir()
        (tmp / "m" / "config.json").write_text(json.dumps(doc))
        return ["search", "--model", str(tmp / "m"), "--preset", "l40s-x8"]
    change = (
        (lambda d: d.update(name=name)) if where == "hardware" else (lambda d: d["accelerators"][0].update(name=name))
    )
    return [*SEARCH[:3], "--hardware", _hardware(tmp, change)]


@pytest.mark.parametrize("name", TRAVERSALS, ids=repr)
@pytest.mark.parametrize("where", ["config", "hardware", "accelerator"])
def test_a_name_that_could_leave_the_directory_is_refused(where, name, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a default run directory would land in tmp_path/results
    if where == "config" and name == "":
        return  # no name: the model's folder names it (the searched_run fixture runs that case)
    err = _fails(_name_argv(where, name, tmp_path), capsys)
    assert re.search(r"(_mi_tune\.name|name): expected a name", err), err
    assert not (tmp_path / "results").exists() and not (tmp_path.parent / "X").exists()


@given(st.text(max_size=300))
@settings(max_examples=300, deadline=None)
def test_path_component_always_stays_one_folder_below(name):
    part = ranges.path_component(name)
    base = Path("/results")
    assert (base / part).resolve().parent == base and part == Path(part).name and not part.startswith(".")


# every reader of a file from outside: a device (would read forever), bytes that are not UTF-8, a file past the
# reader's size bound (sparse: no disk used), a directory
READERS = {
    "hardware": lambda p, t: [*SEARCH[:3], "--hardware", p, "--out", str(t / "run")],
    "workload": lambda p, t: [*SEARCH, "--workload", p, "--out", str(t / "run")],
    "space": lambda p, t: [*SEARCH, "--space", p, "--out", str(t / "run")],
    "config": lambda p, t: ["search", "--model", p, "--preset", "l40s-x8", "--out", str(t / "run")],
    "lengths": lambda p, t: [*SEARCH, "--lengths-file", p, "--out", str(t / "run")],
    "plan": lambda p, t: ["estimate", p, *MODEL],
    "best": lambda p, t: ["serve", p, "--dry-run"],
    "bench-result": lambda p, t: ["bench", "--from-file", p],
}
FILE_TYPES = {
    "device": (lambda t: "/dev/zero", r"/dev/zero: expected a regular file, not a device"),
    "not-utf8": (lambda t: _latin1(t), r"not UTF-8 text \(byte 0xe9 at offset 13\)"),
    "too-big": (lambda t: _sparse(t, 300 * 2**20), r"larger than \d+ MiB"),
    "directory": (lambda t: str(t), r"cannot read \(Is a directory\)"),
}


def _latin1(tmp: Path) -> str:
    path = tmp / "latin1.json"
    path.write_bytes('{"name": "caf\xe9"}\n'.encode("latin-1"))
    return str(path)


def _sparse(tmp: Path, size: int) -> str:
    path = tmp / "big.json"
    with path.open("wb") as f:
        f.truncate(size)
    return str(path)


# a model given as a directory is where config.json is looked up, not a file refused: its own row is
# model-dir-without-config
READER_CASES = [(r, f) for r in READERS for f in FILE_TYPES if (r, f) != ("config", "directory")]


@pytest.mark.parametrize(("reader", "file_type"), READER_CASES)
def test_every_reader_refuses_what_is_not_a_bounded_utf8_file(reader, file_type, tmp_path, capsys):
    make, expected = FILE_TYPES[file_type]
    err = _fails(READERS[reader](make(tmp_path), tmp_path), capsys)
    assert re.search(expected, err), err


@pytest.fixture(scope="module")
def searched_run(tmp_path_factory):
    """One search with the default run directory, from a model folder and a hardware name full of characters a
    path must not take as they are ('odd name;$(x)', 'box *?|<>'): its best.yaml feeds the rows below."""
    import os

    tmp = tmp_path_factory.mktemp("searched")
    doc = json.loads((Path(catalog.__file__).parent / "models" / "llama-3.1-70b.json").read_text())
    doc["_mi_tune"].pop("name")  # the folder names the model
    folder = tmp / "odd name;$(x)"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(doc))
    hardware = _hardware(tmp, lambda d: d.update(name="box *?|<>"))
    cwd = os.getcwd()
    os.chdir(tmp)
    try:
        assert run(["search", "--model", str(folder), "--hardware", hardware, "--trials", "4", "--quiet"]) == 0
    finally:
        os.chdir(cwd)
    (out,) = (tmp / "results").iterdir()
    return tmp, out


def test_the_default_run_directory_is_one_sanitised_folder_under_results(searched_run):
    tmp, out = searched_run
    assert [p.name for p in tmp.iterdir()] and out.parent == tmp / "results"
    assert re.fullmatch(r"odd-name-x-box-\d{8}-\d{6}", out.name), out.name  # names reduced to safe characters
    assert (out / "best.yaml").is_file()


BEST_ROWS = [  # (where in best.yaml, bad value): the embedded profile, the plan and the workload it records
    ("hardware.profile.accelerators[0].mem_bw_gbs", float("nan")),
    ("hardware.profile.accelerators[0].memory_gib", float("inf")),
    ("hardware.profile.host.memory_gib", -1.0),
    ("hardware.profile.accelerators[0].name", "../../X"),
    ("phases.both.tp", 0),
    ("phases.both.batching.max_running", 10**9),
    ("workload.isl", -1),
    ("workload.rate_rps", float("nan")),
]


@pytest.mark.parametrize(("where", "value"), BEST_ROWS, ids=[w for w, _ in BEST_ROWS])
def test_a_best_yaml_is_read_with_the_same_ranges(searched_run, where, value, tmp_path, capsys):
    _, out = searched_run
    doc = yaml.safe_load((out / "best.yaml").read_text())
    _set(doc, where, value)
    path = tmp_path / "best.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    err = _fails(["serve", str(path), "--dry-run"], capsys)
    assert f"best.yaml: {where}: expected " in err, err


# search spaces: each plan field a dimension may name, offered a value just outside the plan's range
SPACE_FIELDS = ("tp", "dp", "pp", "dcp", "replicas", "batching.max_running", "batching.chunked_prefill_tokens")
SPACE_ROWS = [
    pytest.param(f, v, id=f"{f}={v}")
    for f in SPACE_FIELDS
    for v in _outside(ranges.field_range(*(("Batching", f[9:]) if "." in f else ("PhasePlan", f))), True)
]


@pytest.mark.parametrize(("field", "value"), SPACE_ROWS)
def test_every_space_choice_is_in_its_plan_field_range(field, value, tmp_path, capsys):
    dims = ("" if field == "tp" else TP) + f"  - {{name: d, field: {field}, choices: [{value}]}}\n"
    if field == "tp":
        dims = dims.replace("name: d", "name: tp")
    err = _fails([*SEARCH, "--space", _space(tmp_path, dims), "--out", str(tmp_path / "r")], capsys)
    assert not (tmp_path / "r").exists()  # refused before the run directory is made
    name = "tp" if field == "tp" else "d"
    assert re.search(
        rf"space\.yaml: {name}: expected .*got {value:,}|space\.yaml: {name}: expected .*got {value}", err
    ), err


def test_a_path_in_the_run_directory_that_cannot_be_written_is_one_line(searched_run, tmp_path, capsys):
    """A write the environment refuses (here report.md is a folder) names the path and exits 2, no traceback."""
    import shutil

    _, out = searched_run
    run_dir = tmp_path / "copy"
    shutil.copytree(out, run_dir)
    (run_dir / "report.md").unlink()
    (run_dir / "report.md").mkdir()
    err = _fails(["report", str(run_dir)], capsys)
    assert re.search(r"report\.md: cannot write \(Is a directory\)", err), err


@pytest.mark.parametrize("choices", ["[3, 5, 7]", "[16]", "[6]"])
def test_a_space_whose_layouts_fit_no_gpu_count_is_refused_before_the_run(choices, tmp_path, capsys):
    space = _space(tmp_path, f"  - {{name: tp, field: tp, choices: {choices}}}\n")
    err = _fails([*SEARCH, "--space", space, "--out", str(tmp_path / "r")], capsys)
    assert f"space.yaml: tp: no layout of the choices (tp {choices}) fits 8 GPUs" in err, err
    assert not (tmp_path / "r").exists()
