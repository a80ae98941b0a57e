import hashlib
import json
from pathlib import Path

import pytest
import yaml

from autotune.catalog.devices import find_device
from autotune.catalog.presets import list_presets, load_preset, preset_names, preset_rows
from autotune.specs.errors import MiTuneError
from autotune.specs.hardware import HardwareProfile, on_fabric
from autotune.specs.io import dump_yaml, from_dict

REQUIRED = {"rtx-pro-6000-x8", "l20-x8", "l40s-x8", "rtx-4090-x8", "h20-x8", "h200-x8"}
NAMES = preset_names()


def test_required_presets_ship():
    assert set(NAMES) >= REQUIRED
    assert [hw.name for hw in list_presets()] == list(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_round_trip_is_identical(name):
    hw = load_preset(name)
    text = dump_yaml(hw)
    back = from_dict(HardwareProfile, yaml.safe_load(text), name)
    assert back == hw and dump_yaml(back) == text and back.fingerprint == hw.fingerprint


@pytest.mark.parametrize("name", NAMES)
def test_preset_is_well_formed(name):
    hw = load_preset(name)
    n = hw.num_gpus
    assert hw.name == name and hw.source == "preset" and hw.sources
    assert all(hw.links[i][i] == "X" and hw.p2p[i][i] for i in range(n))
    assert all(hw.links[i][j] == hw.links[j][i] and hw.p2p[i][j] == hw.p2p[j][i] for i in range(n) for j in range(n))
    assert [a.index for a in hw.accelerators] == list(range(n))
    assert hw.host.inter_socket_gbs > 0 and hw.host.sockets == 2 and hw.host.memory_gib > 0
    behind_switch = any(label in ("PIX", "PXB") for row in hw.links for label in row)
    if hw.interconnect == "pcie":
        assert (hw.pcie_switch_uplink_gbs > 0) == behind_switch


@pytest.mark.parametrize("name", NAMES)
def test_accelerators_agree_with_the_datasheet_table(name):
    hw = load_preset(name)
    for a in hw.accelerators:
        spec = find_device(a.name, a.vendor)
        assert spec is not None, a.name
        assert (a.memory_gib, a.mem_bw_gbs, a.peak_tflops, a.arch) == (
            spec.memory_gib,
            spec.mem_bw_gbs,
            spec.peak_tflops,
            spec.arch,
        )
        assert a.features == spec.features and a.pcie_gen == spec.pcie_gen
        nvlinked = any(on_fabric(label) for label in hw.links[a.index] if label != "X")
        assert a.nvlink_gbs == (spec.nvlink_gbs if nvlinked else 0.0)


def test_interconnects():
    assert load_preset("rtx-pro-6000-x8").interconnect == "pcie"
    assert load_preset("h200-x8").interconnect == "nvlink"
    assert load_preset("h20-x8").interconnect == "nvlink"
    assert load_preset("h20-x8").gpu.nvlink_gbs == 450.0


def test_rtx_4090_has_no_p2p():
    p2p = load_preset("rtx-4090-x8").p2p
    assert not any(ok for i, row in enumerate(p2p) for j, ok in enumerate(row) if i != j)


def test_rtx_pro_6000_layout_and_measurements():
    hw = load_preset("rtx-pro-6000-x8")
    assert hw.links[0] == ("X", "PIX", "NODE", "NODE", "SYS", "SYS", "SYS", "SYS")
    assert hw.host.inter_socket_gbs == 32.0 and hw.pcie_switch_uplink_gbs == 63.0
    for key, curve in hw.measured.collectives.items():
        p = int(key.split("/")[1])
        sizes = [pt.message_bytes for pt in curve]
        assert sizes == sorted(sizes)
        for pt in curve:  # busbw is derived from the recorded time: bytes / time x 2(p-1)/p
            busbw_gbs = pt.message_bytes / pt.latency_us / 1e3 * 2 * (p - 1) / p
            assert pt.busbw_gbs == pytest.approx(busbw_gbs, rel=1e-3, abs=5e-5)


def test_only_boxes_with_public_measurements_carry_them():
    assert [hw.name for hw in list_presets() if hw.measured is not None] == ["rtx-pro-6000-x8"]


def test_unknown_preset_lists_the_known_ones():
    with pytest.raises(MiTuneError) as err:
        load_preset("dgx-b300")
    message = str(err.value)
    assert message == f"unknown preset 'dgx-b300' (known: {', '.join(NAMES)})" and "\n" not in message


def test_rows_for_the_presets_command():
    rows = {r["name"]: r for r in preset_rows()}
    assert rows["rtx-4090-x8"] == {
        "name": "rtx-4090-x8",
        "gpus": 8,
        "gpu": "NVIDIA GeForce RTX 4090",
        "memory_gib": 24.0,
        "interconnect": "pcie",
        "pcie_gen": 4,
        "p2p": "no",
    }
    assert rows["h200-x8"]["p2p"] == "yes" and rows["h200-x8"]["interconnect"] == "nvlink"


def test_presets_are_package_data():
    pyproject = (Path(__file__).parents[2] / "pyproject.toml").read_text()
    assert '"presets/*.yaml"' in pyproject


def test_a_profile_written_with_the_old_memory_gb_key_loads_the_same():
    """memory_gb held GiB before the field was named memory_gib: old best.yaml / probe files load unchanged."""
    hw = load_preset("rtx-pro-6000-x8")
    doc = yaml.safe_load(dump_yaml(hw))
    doc["host"]["memory_gb"] = doc["host"].pop("memory_gib")
    for accelerator in doc["accelerators"]:
        accelerator["memory_gb"] = accelerator.pop("memory_gib")
    assert "memory_gib" not in dump_yaml(doc) and from_dict(HardwareProfile, doc, "old.yaml") == hw
    # the fingerprint (best.yaml's record, storage keys) is still the hash of the document as written before
    old = {k: v for k, v in doc.items() if k not in ("name", "source", "sources", "fingerprint", "corrections")}
    assert hw.fingerprint == hashlib.sha256(json.dumps(old, sort_keys=True).encode()).hexdigest()[:16]
    doc["accelerators"][0]["memory_gib"] = 96.0
    with pytest.raises(MiTuneError, match=r"old\.yaml: accelerators\[0\]: both 'memory_gb' and 'memory_gib' given"):
        from_dict(HardwareProfile, doc, "old.yaml")
