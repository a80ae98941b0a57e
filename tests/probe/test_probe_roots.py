"""`mi-tune probe --sysfs-root/--proc-root`: a recorded tree probes through the CLI exactly as a live machine."""

import json

import pytest

from autotune.cli import run

BOXES = [
    "esc8000a_rtx_pro_6000",
    "icx_rtx4090_two_switches",
    "genoa_rtx4090_direct",
    "bdw_nested_switches",
    "kunpeng_ascend_910b",
]


@pytest.mark.parametrize("box", BOXES)
def test_recorded_tree_gives_the_recorded_topo_labels(box_tree, layout, box, capsys, monkeypatch):
    import autotune.probe.profile as profile

    def no_nvml():  # a root is given: the live machine's NVML must not answer for the recorded tree
        raise AssertionError("NVML was consulted for a recorded tree")

    monkeypatch.setattr(profile, "probe_nvml", no_nvml)
    sys_root, proc_root = box_tree(box)
    assert run(["probe", "--sysfs-root", str(sys_root), "--proc-root", str(proc_root), "--json"]) == 0
    hw = json.loads(capsys.readouterr().out)
    expected = [row.split() for row in layout(box)["topo"]]
    assert hw["links"] == expected
    assert len(hw["accelerators"]) == len(expected)


def test_text_output_prints_the_recorded_matrix(box_tree, layout, capsys):
    sys_root, proc_root = box_tree("bdw_nested_switches")
    assert run(["probe", "--sysfs-root", str(sys_root), "--proc-root", str(proc_root)]) == 0
    out = capsys.readouterr().out
    rows = [line.split()[1:9] for line in out.splitlines() if line.startswith("GPU") and len(line.split()) == 10]
    assert rows == [row.split() for row in layout("bdw_nested_switches")["topo"]]
    assert out.startswith("host: Intel(R) Xeon(R) CPU E5-2680 v4 @ 2.40GHz; 2 socket(s), 28 cores")


def test_sysfs_root_alone_reads_the_live_proc(box_tree, capsys):
    sys_root, _ = box_tree("kunpeng_ascend_910b")
    assert run(["probe", "--sysfs-root", str(sys_root), "--json"]) == 0
    hw = json.loads(capsys.readouterr().out)
    assert hw["links"] == [["X", "PHB"], ["PHB", "X"]] and hw["host"]["memory_gib"] > 0


@pytest.mark.parametrize("flag", ["--sysfs-root", "--proc-root"])
def test_a_root_that_is_not_a_directory_is_bad_input(tmp_path, flag, capsys):
    missing = tmp_path / "nope"
    assert run(["probe", flag, str(missing)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"mi-tune: error: {flag} {missing}: expected a directory") and "\n" not in err
