"""The CLI contract: exit codes, one-line errors, the files a search writes, serve --dry-run."""

import json
import subprocess
import sys

import pytest
import yaml

from autotune.cli import run
from autotune.specs import load_best

SEARCH = ["search", "--model", "deepseek-v4.1-flash", "--preset", "rtx-pro-6000-x8", "--trials", "60", "--seed", "1"]
SEARCH += ["--isl", "2048", "--osl", "512"]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("run") / "v41"
    code = run([*SEARCH, "--out", str(out)])
    assert code == 0
    return out


def test_search_writes_the_run_directory(run_dir):
    for name in (
        "best.yaml",
        "trials.csv",
        "pareto.csv",
        "summary.json",
        "report.md",
        "report.html",
        "plots/pareto.png",
        "plots/breakdown.png",
        "hardware.yaml",
        "study.journal",  # the run's own study storage (search/storage.py)
        "manifest.yaml",
    ):
        assert (run_dir / name).is_file(), name
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["trials"] == 60 and summary["speedup"] > 0
    report = (run_dir / "report.md").read_text()
    assert "## Best plan" in report and "engine default" in report
    assert (run_dir / "plots/pareto.png").read_bytes()[:4] == b"\x89PNG"


def test_best_yaml_round_trips_and_matches_its_plan(run_dir):
    text = (run_dir / "best.yaml").read_text()
    best = load_best(run_dir / "best.yaml")
    from autotune.specs import dump_yaml

    assert dump_yaml(best) == text
    assert best.prediction.feasible and best.baseline.speedup > 0
    assert best.launch.processes and all(p.argv for p in best.launch.processes)


def test_serve_dry_run_prints_the_plan_parallel_flags(run_dir, capsys):
    assert run(["serve", str(run_dir / "best.yaml"), "--dry-run"]) == 0
    out = capsys.readouterr().out
    best = yaml.safe_load((run_dir / "best.yaml").read_text())
    for phase in best["phases"].values():
        tp = phase["tp"] * (phase["dp"] if best["engine"] == "sglang" else 1)
        assert str(tp) in out
    assert "127.0.0.1" in out


def test_same_seed_picks_the_same_best_plan(run_dir, tmp_path):
    again = tmp_path / "again"
    assert run([*SEARCH, "--out", str(again)]) == 0
    first, second = load_best(run_dir / "best.yaml"), load_best(again / "best.yaml")
    assert first.plan == second.plan


def test_report_rebuilds_from_the_run_directory(run_dir, capsys):
    (run_dir / "report.md").unlink()
    assert run(["report", str(run_dir)]) == 0
    assert (run_dir / "report.md").is_file()


def test_estimate_a_best_yaml(run_dir, capsys):
    assert (
        run(
            [
                "estimate",
                str(run_dir / "best.yaml"),
                "--preset",
                "rtx-pro-6000-x8",
                "--isl",
                "2048",
                "--osl",
                "512",
                "--json",
            ]
        )
        == 0
    )
    prediction = json.loads(capsys.readouterr().out)
    assert prediction["feasible"] and prediction["total_tok_s"] > 0


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["search", "--model", "no-such-model"], "unknown model 'no-such-model' (known: deepseek-v4.1-flash"),
        (["search", "--model", "deepseek-v4.1-flash", "--preset", "nope"], "unknown preset 'nope' (known:"),
        (["search", "--model", "deepseek-v4.1-flash", "--engine", "trt"], "--engine: expected one of"),
        (["search", "--model", "deepseek-v3", "--preset", "l20-x8", "--trials", "15"], "GB of weights and"),
        (["search", "--model", "deepseek-v4.1-flash", "--concurrency", "4", "--rate", "1"], "not both"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(argv, message, capsys, tmp_path):
    assert run([*argv, "--out", str(tmp_path / "o")] if argv[0] == "search" else argv) == 2
    err = capsys.readouterr().err
    assert message in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_malformed_hardware_file(tmp_path, capsys):
    bad = tmp_path / "hw.yaml"
    bad.write_text("host: [unclosed\n")
    assert run(["search", "--model", "deepseek-v4.1-flash", "--hardware", str(bad), "--out", str(tmp_path)]) == 2
    assert f"{bad}: malformed YAML" in capsys.readouterr().err


def test_models_and_presets_list_the_catalog(capsys):
    assert run(["models"]) == 0
    out = capsys.readouterr().out
    assert "deepseek-v4.1-flash" in out and "deepseek_v41" in out and "890" in out
    assert run(["presets"]) == 0
    out = capsys.readouterr().out
    assert "rtx-pro-6000-x8" in out and "h200-x8" in out


def test_probe_on_a_machine_without_accelerators(capsys):
    pytest.importorskip("pynvml")
    code = run(["probe"])
    out = capsys.readouterr().out
    assert code == 0
    if "no accelerators found" not in out:  # a developer machine with a GPU lists it instead
        assert "GPU" in out or "accelerator" in out.lower()


def test_console_script_entry_point_runs():
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from autotune.cli import main; sys.argv=['mi-tune','search','--model','nope']; main()",
        ],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2 and done.stderr.startswith("mi-tune: error: unknown model 'nope'")


def test_console_script_ends_like_a_normal_exit():
    """main() skips the interpreter's teardown, not what a normal exit does: the exit handlers run (after the
    command's output), buffered output is written, the exit code is the command's."""
    code = (
        "import atexit, sys; from autotune.cli import main; atexit.register(lambda: print('handler ran'));"
        " sys.argv = ['mi-tune', 'presets']; main()"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "rtx-pro-6000-x8" in done.stdout and done.stdout.rstrip().endswith("handler ran")


def test_search_on_a_hardware_file_and_fewer_gpus(tmp_path, capsys):
    from autotune.catalog import load_preset
    from autotune.specs import save

    hw_file = save(load_preset("h200-x8"), tmp_path / "box.yaml")
    out = tmp_path / "run"
    argv = ["search", "--model", "llama-3.1-70b", "--hardware", str(hw_file), "--gpus", "4", "--trials", "30"]
    assert run([*argv, "--out", str(out)]) == 0
    best = load_best(out / "best.yaml")
    assert best.hardware.num_gpus == 4 and best.plan.num_gpus == 4
    assert all(g < 4 for phase in best.phases.values() for g in phase.gpus)
    assert "4x NVIDIA H200" in capsys.readouterr().out


TP8_PLAN = (
    "schema: mi-tune/plan/v1\nengine: sglang\nmode: aggregated\nphases:\n  both: {gpus: [0,1,2,3,4,5,6,7], tp: 8}\n"
)


def test_estimate_explain_shows_why_pcie_ipc_wins_a_dense_tp_plan(tmp_path, capsys):
    plan = tmp_path / "tp8.yaml"
    plan.write_text(TP8_PLAN)
    argv = ["estimate", str(plan), "--model", "qwen3-235b-a22b", "--preset", "rtx-pro-6000-x8"]
    assert run([*argv, "--isl", "2048", "--osl", "256", "--concurrency", "8", "--explain"]) == 0
    rows = {tuple(line.split()[1:3]): line for line in capsys.readouterr().out.splitlines() if line.startswith("both")}
    # TP8 over PCIe: the engines' PCIe-IPC all-reduce and NCCL's channel count are the levers, each with its cost
    assert "allreduce:pcie_ipc" in rows[("allreduce", "pcie_ipc")] and "+" in rows[("allreduce", "pcie_ipc")]
    assert "allreduce:nccl" in rows[("nccl_min_channels", "8")]


def test_estimate_names_the_engine_rule_a_plan_breaks(tmp_path, capsys):
    plan = tmp_path / "bad.yaml"
    plan.write_text(TP8_PLAN.replace("sglang", "vllm").replace("tp: 8}", "tp: 8, kernels: {attention: flashinfer}}"))
    assert run(["estimate", str(plan), "--model", "deepseek-v3", "--preset", "rtx-pro-6000-x8"]) == 2
    err = capsys.readouterr().err.strip()
    assert "cannot run: engine rule: vllm 0.34.0: kernels.attention=flashinfer: FLASHINFER_MLA needs" in err
    assert "\n" not in err


def test_python_dash_m_runs_the_cli():
    """`python -m autotune.cli` is the console script: same commands, same exit codes."""
    done = subprocess.run([sys.executable, "-m", "autotune.cli", "presets"], capture_output=True, text=True)
    assert done.returncode == 0 and "rtx-pro-6000-x8" in done.stdout
    bad = subprocess.run([sys.executable, "-m", "autotune.cli", "search", "--model", "nope"], capture_output=True)
    assert bad.returncode == 2
