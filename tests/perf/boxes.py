"""Boxes the perf tests share that no preset describes."""

import dataclasses

from autotune.catalog import load_preset
from autotune.catalog.devices import DEVICES_BY_KEY


def b200_box():
    """The h200-x8 box with B200 datasheet GPUs (as tests/bench/op_check.py builds it)."""
    h200, spec = load_preset("h200-x8"), DEVICES_BY_KEY["b200"]
    gpus = tuple(
        dataclasses.replace(a, name=spec.name, memory_gib=spec.memory_gib, mem_bw_gbs=spec.mem_bw_gbs,
                            peak_tflops=dict(spec.peak_tflops), arch=spec.arch, features=spec.features)
        for a in h200.accelerators
    )  # fmt: skip
    return dataclasses.replace(h200, name="b200 (test)", accelerators=gpus, measured=None, corrections={})


def sm80_box(device: str = "a100-sxm-80gb"):
    """The a100-sxm-x8 preset with A100 / A800 SXM4 datasheet GPUs (as tests/bench/op_check.py builds its a100_sxm
    box)."""
    hw, spec = load_preset("a100-sxm-x8"), DEVICES_BY_KEY[device]
    gpus = tuple(
        dataclasses.replace(a, name=spec.name, memory_gib=spec.memory_gib, mem_bw_gbs=spec.mem_bw_gbs,
                            peak_tflops=dict(spec.peak_tflops), arch=spec.arch, features=spec.features,
                            nvlink_gbs=spec.nvlink_gbs, pcie_gen=spec.pcie_gen)
        for a in hw.accelerators
    )  # fmt: skip
    return dataclasses.replace(hw, name=f"{device} (test)", accelerators=gpus, measured=None, corrections={})


def mha_model(model):
    """The model with as many KV heads as query heads in every layer (an MHA layer, as op_check builds its MHA rows)."""
    att = model.layers[0].attention
    hd = att.score_dim // 2
    mha = dataclasses.replace(
        att, num_kv_heads=att.num_heads, kv_elems_per_token=2 * att.num_heads * hd,
        kv_read_elems_per_token=2 * att.num_heads * hd,
    )  # fmt: skip
    return dataclasses.replace(model, layers=tuple(dataclasses.replace(la, attention=mha) for la in model.layers))
