"""format_probe(): what `mi-tune probe` prints: host, accelerators, `nvidia-smi topo -m` style matrices, notes."""

from __future__ import annotations

from autotune.probe.profile import ProbeResult
from autotune.specs.hardware import FABRIC_LABELS, HardwareProfile, HostInfo

P2P_MARKS = {True: "OK", False: "--"}


def format_probe(result: ProbeResult) -> str:
    lines = [_host_line(result.host)]
    hw = result.profile
    if hw is None:
        lines.append("no accelerators found")
    else:
        lines += ["", *_accelerator_table(hw), "", "topology (nvidia-smi topo -m labels):"]
        lines += _matrix(hw, [list(row) for row in hw.links], numa=True)
        lines += ["", "peer access (P2P):"]
        lines += _matrix(
            hw, [[P2P_MARKS[ok] if i != j else "X" for j, ok in enumerate(row)] for i, row in enumerate(hw.p2p)]
        )
        lines += ["", _summary(hw), *_switch_lines(result)]
        if hw.measured is not None:
            lines += ["", *measured_lines(hw)]
    if result.notes:
        lines += ["", "notes:", *(f"  - {note}" for note in result.notes)]
    return "\n".join(lines)


def measured_lines(hw: HardwareProfile) -> list[str]:
    """What `probe --bench` measured: per op class x dtype the median achieved rate of each bucket, copies,
    collective bus bandwidth at the largest message, the tool versions and what was skipped."""
    from autotune.perf.rates import probed_points

    m = hw.measured
    lines = ["measured (probe --bench): " + ", ".join(f"{k} {v}" for k, v in m.versions.items())]
    probed = probed_points(hw)
    for op_class, dtype in sorted({(k[0], k[1]) for k in probed}):
        cells = [
            f"{bucket} {tf:.4g} TFLOPS / {gbs:.4g} GB/s"
            for (c, d, bucket), (tf, gbs) in probed.items()
            if (c, d) == (op_class, dtype)
        ]
        lines.append(f"  {op_class} {dtype}: " + "; ".join(cells))
    floors = [p for p in m.ops if p.bucket == "launch"]
    if floors:
        lines.append("  kernel floor: " + ", ".join(f"{p.op_class} {p.dtype} {p.time_us:.3g} us" for p in floors))
    if m.mem_bw_gbs:
        lines.append(f"  device memory copy: {m.mem_bw_gbs:g} GB/s")
    pairs = [gbs for i, row in enumerate(m.p2p_gbs) for j, gbs in enumerate(row) if i != j]
    if pairs:
        lines.append(f"  P2P copy: {min(pairs):g}-{max(pairs):g} GB/s over {len(pairs)} ordered pairs")
    if m.host_copy_gbs:
        lines.append("  pinned host copy: " + ", ".join(f"{k} {v:g} GB/s" for k, v in sorted(m.host_copy_gbs.items())))
    for name, curve in sorted(m.collectives.items()):
        last = max(curve, key=lambda pt: pt.message_bytes)
        first = min(curve, key=lambda pt: pt.message_bytes)
        lines.append(
            f"  {name}: {first.latency_us:.4g} us at {first.message_bytes} B, "
            f"busbw {last.busbw_gbs:.4g} GB/s at {last.message_bytes} B"
        )
    lines += [f"  - {note}" for note in m.notes]
    return lines


def _host_line(host: HostInfo) -> str:
    socket = f", inter-socket {host.inter_socket_gbs:g} GB/s (NCCL model)" if host.inter_socket_gbs else ""
    return (
        f"host: {host.cpu_model}; {host.sockets} socket(s), {host.cores} cores, {host.numa_nodes} NUMA node(s), "
        f"{host.memory_gib:g} GiB memory{socket}"
    )


def _accelerator_table(hw: HardwareProfile) -> list[str]:
    header = (
        "GPU",
        "name",
        "bdf",
        "mem GiB",
        "mem GB/s",
        "bf16 TF",
        "fp8 TF",
        "fp4 TF",
        "arch",
        "NUMA",
        "PCIe",
        "NVLink GB/s",
    )
    rows = [
        (
            str(a.index),
            a.name,
            a.pci_bdf or "-",
            f"{a.memory_gib:g}",
            f"{a.mem_bw_gbs:g}" if a.mem_bw_gbs else "?",
            *(f"{a.peak_tflops[d]:g}" if d in a.peak_tflops else "-" for d in ("bf16", "fp8", "fp4")),
            a.arch,
            str(a.numa_node),
            f"Gen{a.pcie_gen} x{a.pcie_width}",
            f"{a.nvlink_gbs:g}" if a.nvlink_gbs else "-",
        )
        for a in hw.accelerators
    ]
    return _columns([header, *rows])


def _matrix(hw: HardwareProfile, cells: list[list[str]], numa: bool = False) -> list[str]:
    names = [f"GPU{a.index}" for a in hw.accelerators]
    header = ["", *names, *(["NUMA"] if numa else [])]
    rows = [[names[i], *row, *([str(hw.accelerators[i].numa_node)] if numa else [])] for i, row in enumerate(cells)]
    return _columns([header, *rows])


def _summary(hw: HardwareProfile) -> str:
    pairs = [ok for i, row in enumerate(hw.p2p) for j, ok in enumerate(row) if i != j]
    p2p = "all pairs" if all(pairs) else "none" if not any(pairs) else f"{sum(pairs)} of {len(pairs)} pairs"
    uplink = f", switch uplink {hw.pcie_switch_uplink_gbs:g} GB/s" if hw.pcie_switch_uplink_gbs else ""
    fabric = sorted({label for row in hw.links for label in row if label in FABRIC_LABELS})
    kind = f"{hw.interconnect} ({', '.join(fabric)} fabric)" if fabric else hw.interconnect
    return f"interconnect: {kind}; P2P: {p2p}{uplink}; fingerprint {hw.fingerprint}"


def _switch_lines(result: ProbeResult) -> list[str]:
    index = {a.pci_bdf: a.index for a in result.profile.accelerators} if result.profile else {}
    return [
        f"PCIe switch {s.upstream_port}: uplink Gen{s.uplink.current_gen or s.uplink.max_gen} "
        f"x{s.uplink.current_width or s.uplink.max_width} ({s.uplink.gbs:g} GB/s) above "
        + ", ".join(f"GPU{index[b]}" for b in s.members if b in index)
        for s in result.switches
    ]


def _columns(rows: list[tuple[str, ...] | list[str]]) -> list[str]:
    widths = [max(len(row[k]) for row in rows) for k in range(len(rows[0]))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows]
