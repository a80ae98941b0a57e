"""`kernels check` and `kernels tune-moe`: mi-tune's fused-MoE kernel and the engines' MoE config files."""

from __future__ import annotations

import sys

import typer

from autotune import validate
from autotune.cli.app import kernels_app
from autotune.cli.options import table
from autotune.specs import MiTuneError, rundir


@kernels_app.command("check")
def kernels_check():
    """Compare mi-tune's fused-MoE Triton kernel with its torch reference (CPU: Triton interpreter)."""
    from autotune.kernels import check

    rows = check()
    print(table(rows, list(rows[0])))
    failed = sum(row["ok"] != "yes" for row in rows)
    print(f"{len(rows) - failed} passed, {failed} failed")
    if failed:
        raise typer.Exit(1)


@kernels_app.command("tune-moe")
def kernels_tune_moe(
    best: str = typer.Option(None, "--best", help="A best.yaml: tune the shapes its plan runs (instead of --model)."),
    model: str = typer.Option(None, "--model", help="Catalog name (see `mi-tune models`) or a path to a config.json."),
    tp: int = typer.Option(0, "--tp", help="GPUs of the MoE layers (a plan's tp x dp)."),
    ep: int = typer.Option(1, "--ep", help="Expert-parallel size (1: experts split over tp; tp: whole experts)."),
    dtype: str = typer.Option("bf16", "--dtype", help="bf16 | fp8_w8a8 (file names also: int8_w8a16, int4_w4a16)"),
    engine: str = typer.Option("both", "--engine", help="vllm | sglang | both"),
    batch_sizes: str = typer.Option("", "--batch-sizes", help="Comma-separated tokens per step (default 1..4096)."),
    trials: int = typer.Option(40, "--trials", help="Configs timed in full per batch size."),
    seed: int = typer.Option(0, "--seed"),
    out: str = typer.Option(None, "--out", help="Directory (default moe_configs; with --best <run dir>/moe_configs)."),
    block_shape: str = typer.Option(None, "--block-shape", help="FP8 weight scale block N,K or none."),
    hardware: str = typer.Option(None, "--hardware", help="Without a GPU: the profile whose GPU names the files."),
    preset: str = typer.Option(None, "--preset", help="Without a GPU: the preset whose GPU names the files."),
    device_name: str = typer.Option(None, "--device-name", help="GPU name as torch prints it (overrides)."),
    triton_version: str = typer.Option(None, "--triton-version", help="SGLang folder (default: installed)."),
    device: str = typer.Option("cuda", "--device", help="cuda, or cpu (Triton interpreter; for tests)."),
    own_kernel: bool = typer.Option(False, "--own-kernel", help="Time mi-tune's kernel even with the engine here."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the files each engine looks up and the space."),
):
    """Tune the engines' fused-MoE Triton configs on this GPU and write them where vLLM / SGLang read them."""
    from autotune.kernels.moe_tune import build_request, check_device, describe, requests_from_best, tune_moe

    validate.flags("kernels", {"--tp": tp, "--ep": ep, "--trials": trials, "--seed": seed})
    try:
        sizes = tuple(int(b) for b in batch_sizes.split(",") if b.strip())
    except ValueError:
        raise MiTuneError(f"--batch-sizes: expected comma-separated integers, got {batch_sizes!r}") from None
    options = dict(batch_sizes=sizes, trials=trials, seed=seed, device_name=device_name,
                   triton_version=triton_version, device=device, own_kernel=own_kernel)  # fmt: skip
    if best:
        if model or tp or ep != 1 or dtype != "bf16" or engine != "both" or block_shape:
            raise MiTuneError("--best takes model, layout, dtype and engine from the plan: drop --model/--tp/--ep/"
                              "--dtype/--engine/--block-shape")  # fmt: skip
        requests, notes = requests_from_best(best, out, **options)
    elif not model or tp < 1:
        raise MiTuneError("--model and --tp are required (or --best RUN_DIR/best.yaml)")
    else:
        req, notes = build_request(model, tp, ep, dtype, engine, out_dir=out or rundir.MOE_CONFIGS,
                                   block_shape=block_shape, hardware=hardware, preset=preset, **options)  # fmt: skip
        requests = [req]
    if not dry_run:
        check_device(requests[0])
    for note in notes:
        print(f"mi-tune: {note}", file=sys.stderr)
    for req in requests:
        print(describe(req))
    if dry_run:
        return
    for req in requests:
        for path in tune_moe(req, log=lambda line: print(line, file=sys.stderr)):
            print(f"wrote {path}")
