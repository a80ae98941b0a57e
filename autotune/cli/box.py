"""`probe`, `models`, `presets`: the box and the catalog."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer

from autotune import validate
from autotune.cli.app import app
from autotune.cli.options import table
from autotune.specs import MiTuneError, dump_json, save


@app.command()
def probe(
    out: Path = typer.Option(None, "--out", help="Write the hardware profile as YAML to FILE."),
    as_json: bool = typer.Option(False, "--json", help="Print the hardware profile as JSON."),
    bench: bool = typer.Option(
        False, "--bench", help="Measure GEMM/MoE/attention/copy/collective rates into the profile (torch + a GPU)."
    ),
    quick: bool = typer.Option(False, "--quick", help="With --bench: a ~1-minute subset."),
    sysfs_root: Path = typer.Option(None, "--sysfs-root", help="Read a recorded /sys tree (NVML is not used)."),
    proc_root: Path = typer.Option(None, "--proc-root", help="Read a recorded /proc tree (NVML is not used)."),
    bench_device: str = typer.Option("cuda", "--bench-device", hidden=True),  # "cpu": the harness on CPU (tests)
):
    """Discover this machine: host, accelerators, PCIe/NVLink topology, P2P."""
    from autotune import probe as probe_mod
    from autotune.probe.bench import calibrate

    validate.out_file("--out", out)
    result = probe_mod.probe_roots(sysfs_root, proc_root)
    if bench:
        from autotune.search.bench_settings import nccl_settings

        settings = nccl_settings(result.profile) if result.profile is not None else []  # what the search can choose
        result = calibrate(result, quick=quick, device=bench_device, nccl_settings=settings)
    elif quick:
        raise MiTuneError("--quick: applies to --bench only")
    if as_json:
        print(
            dump_json(result.profile)
            if result.profile
            else json.dumps({"host": _host_dict(result), "accelerators": []})
        )
    else:
        print(probe_mod.format_probe(result))
    if out and result.profile is None:
        print(f"--out {out}: no accelerators found, so no hardware profile was written", file=sys.stderr)
    elif out:
        save(result.profile, out)
        print(f"wrote {out}", file=sys.stderr)


def _host_dict(result) -> dict:
    from autotune.specs import to_dict

    return to_dict(result.host)


@app.command()
def models():
    """List the built-in models."""
    from autotune.catalog.models import model_rows

    columns = ["name", "family", "total_params_b", "active_params_b", "kv_bytes_per_token", "state_bytes_per_seq"]
    print(table(model_rows(), [*columns, "hf_id"]))
    from autotune.video.catalog import video_model_rows

    print("\nvideo (SGLang Diffusion):")
    print(table(video_model_rows(), ["name", "family", "total_params_b", "active_params_b", "hf_id"]))


@app.command()
def presets():
    """List the built-in hardware presets."""
    from autotune.catalog.presets import preset_rows

    rows = preset_rows()
    print(table(rows, list(rows[0])))
