"""Every bad input exits 2 with one line on stderr, `mi-tune: error: ...`, naming the flag or file and what was
expected; no traceback. Each row runs the real CLI (autotune.cli.run) on one bad input."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from autotune import catalog
from autotune.catalog import load_model, load_preset
from autotune.cli import run
from autotune.specs import to_dict

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
        r"space\.yaml: max_running: expected a positive integer, got -16",
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
    ("negative-ttft", lambda t: [*SEARCH, "--ttft-ms", "-1"], r"--ttft-ms: expected 0 or more .*got -1"),
    ("negative-tpot", lambda t: [*SEARCH, "--tpot-ms", "-5"], r"--tpot-ms: expected 0 or more .*got -5"),
    ("nan-ttft", lambda t: [*SEARCH, "--ttft-ms", "nan"], r"--ttft-ms: expected a finite number"),
    ("zero-timeout", lambda t: [*SEARCH, "--timeout", "0"], r"--timeout: expected more than 0 seconds"),
    ("negative-timeout", lambda t: [*SEARCH, "--timeout", "-3"], r"--timeout: expected more than 0 seconds"),
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
    ("zero-isl", lambda t: [*SEARCH, "--isl", "0"], r"--isl: expected 1 or more, got 0"),
    ("zero-osl", lambda t: [*SEARCH, "--osl", "0"], r"--osl: expected 1 or more, got 0"),
    ("isl-not-a-number", lambda t: [*SEARCH, "--isl", "abc"], r"'--isl'.*integer.*\(see 'mi-tune search --help'\)"),
    ("zero-trials", lambda t: [*SEARCH[:-2], "--trials", "0"], r"'--trials'"),
    ("more-gpus-than-the-box", lambda t: [*SEARCH, "--gpus", "9"], r"--gpus: expected 1\.\.8 for 'rtx-pro-6000-x8'"),
    ("negative-gpus", lambda t: [*SEARCH, "--gpus", "-1"], r"--gpus: expected 0 or more"),
    ("negative-concurrency", lambda t: [*SEARCH, "--concurrency", "-1"], r"--concurrency: expected 0 or more"),
    ("negative-rate", lambda t: [*SEARCH, "--rate", "-1"], r"--rate: expected 0 or more"),
    ("rate-and-concurrency", lambda t: [*SEARCH, "--rate", "1", "--concurrency", "4"], r"not both"),
    ("negative-seed", lambda t: [*SEARCH, "--seed", "-1"], r"--seed: expected 0\.\.4294967295, got -1"),
    ("zero-workers", lambda t: [*SEARCH, "--workers", "0"], r"'--workers'"),
    ("unknown-engine", lambda t: [*SEARCH, "--engine", "trt"], r"--engine: expected one of auto, vllm, sglang"),
    ("unknown-mode", lambda t: [*SEARCH, "--mode", "x"], r"--mode: expected one of"),
    ("unknown-objective", lambda t: [*SEARCH, "--objective", "speed"], r"objective: expected one of"),
    ("unknown-flag", lambda t: [*SEARCH, "--colour", "red"], r"No such option: --colour"),
    ("missing-model", lambda t: ["search"], r"Missing option '--model'"),
    # the simulator's workload flags and workload files (sim/workloads.py)
    ("negative-burst", lambda t: [*SEARCH, "--burst", "-1"], r"--burst: expected 0 or more"),
    ("negative-isl-std", lambda t: [*SEARCH, "--isl-std", "-1", "--length-dist", "normal"], r"--isl-std: expected 0"),
    (
        "nan-osl-std",
        lambda t: [*SEARCH, "--osl-std", "nan", "--length-dist", "normal"],
        r"--osl-std: expected a finite",
    ),
    (
        "prefix-hit-rate-above-1",
        lambda t: [*SEARCH, "--prefix-hit-rate", "1.5"],
        r"--prefix-hit-rate: expected a share",
    ),
    ("zero-num-requests", lambda t: [*SEARCH, "--num-requests", "0"], r"--num-requests: expected 1 or more"),
    ("slo-percentile-100", lambda t: [*SEARCH, "--slo-percentile", "100"], r"--slo-percentile: expected a percentile"),
    ("slo-percentile-0", lambda t: [*SEARCH, "--slo-percentile", "0"], r"--slo-percentile: expected a percentile"),
    ("unknown-length-dist", lambda t: [*SEARCH, "--length-dist", "zipf"], r"length_dist: expected one of fixed"),
    ("unknown-dataset", lambda t: [*SEARCH, "--dataset", "nope"], r"--dataset: expected one of"),
    ("burst-and-concurrency", lambda t: [*SEARCH, "--burst", "4", "--concurrency", "3"], r"give one"),
    ("workload-file-missing", lambda t: [*SEARCH, "--workload", str(t / "w.yaml")], r"w\.yaml: file not found"),
    (
        "workload-file-negative-slo",
        lambda t: [*SEARCH, "--workload", _file(t, "w.yaml", WORKLOAD + "ttft_ms: -5\n")],
        r"w\.yaml: ttft_ms/tpot_ms: expected values >= 0",
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
        r"config\.json: max_position_embeddings: expected a positive integer, got 0",
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
        lambda t: [*SEARCH[:3], "--hardware", _hardware(t, lambda d: d["accelerators"][0].update(memory_gb=-48))],
        r"box\.yaml: accelerators\[0\]\.memory_gb: expected a value >= 0, got -48",
    ),
    (
        "hardware-unknown-field",
        lambda t: [*SEARCH[:3], "--hardware", _hardware(t, lambda d: d["host"].update(colour="red"))],
        r"box\.yaml: host: unknown field 'colour'",
    ),
    (
        "hardware-wrong-type",
        lambda t: [*SEARCH[:3], "--hardware", _hardware(t, lambda d: d["accelerators"][0].update(memory_gb="lots"))],
        r"box\.yaml: accelerators\[0\]\.memory_gb: expected a number, got 'lots'",
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
        r"p\.yaml: phases\.both\.batching\.max_running: expected a positive integer, got -16",
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
        r"p\.yaml: phases\.both\.gpus: expected GPU indices >= 0",
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
    ("search-negative-measure", lambda t: [*SEARCH, "--measure", "-1"], r"--top: expected a positive number"),
    ("search-measure-port-zero", lambda t: [*SEARCH, "--measure", "1", "--measure-port", "0"], r"--port: expected"),
    ("bench-negative-burst", lambda t: [*BENCH, "--burst", "-1"], r"--burst: expected 0 or more"),
    ("bench-negative-requests", lambda t: [*BENCH, "--num-requests", "-1"], r"--num-requests: expected a positive"),
    ("bench-zero-isl", lambda t: [*BENCH, "--isl", "0"], r"--isl: expected 1 or more"),
    ("bench-negative-ttft", lambda t: [*BENCH, "--ttft-ms", "-1"], r"--ttft-ms: expected 0 or more"),
    ("bench-negative-rate", lambda t: [*BENCH, "--rate", "-2"], r"--rate: expected 0 or more"),
    ("bench-bad-url", lambda t: ["bench", "--url", "notaurl"], r"--url: expected http://HOST:PORT"),
    ("measure-zero-top", lambda t: ["measure", str(t), "--top", "0"], r"--top: expected a positive number of plans"),
    ("measure-port-zero", lambda t: ["measure", str(t), "--port", "0"], r"--port: expected 1\.\.65535"),
    ("measure-negative-requests", lambda t: ["measure", str(t), "--num-requests", "-1"], r"--num-requests: expected 0"),
    (
        "measure-zero-ready-timeout",
        lambda t: ["measure", str(t), "--ready-timeout", "0"],
        r"--ready-timeout: expected more than 0 seconds",
    ),
    ("measure-not-a-run-dir", lambda t: ["measure", str(t)], r"no best\.yaml"),
    ("tune-moe-zero-tp", lambda t: [*TUNE, "--tp", "0"], r"--tp"),
    ("tune-moe-ep-not-dividing", lambda t: [*TUNE, "--tp", "2", "--ep", "3"], r"--tp/--ep: expected positive sizes"),
    ("tune-moe-zero-trials", lambda t: [*TUNE, "--tp", "2", "--trials", "0"], r"--trials: expected a positive"),
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
]


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
        r"5,120-token request; 1 x ([\d.]+) GB GPU holds at most 1 x ([\d.]+) = [\d.]+ GB .*: no plan fits",
        err,
    )
    assert got, err
    weights_gb, kv_gb, gpu_gb, usable_gb = (float(g.replace(",", "")) for g in got.groups())
    dense_b, expert_b = load_model("llama-3.1-70b").weight_bytes()  # the checkpoint's size, counted another way
    assert weights_gb == pytest.approx((dense_b + expert_b) / 1e9, rel=0.02)
    assert gpu_gb == load_preset("l40s-x8").gpu.memory_gb and usable_gb < gpu_gb * 2**30 / 1e9
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
