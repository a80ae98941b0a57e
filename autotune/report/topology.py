"""The plan on the box: where each replica, pipeline stage, prefill and decode pool sits among the box's PCIe
switches, sockets and NVLink, and which of its collectives cross a switch uplink or the socket link.

Placement follows the performance model (perf/ops.py `step_fn`, perf/oplist.py `_comm_ops`): a phase's GPUs are
split into `replicas` consecutive blocks of tp*dp*pp; a replica is stage-major (stage s holds tp*dp consecutive
GPUs), and a stage's tensor-parallel groups are its consecutive blocks of tp (data-parallel attention ranks side by
side); expert parallelism spans the stage. Switches and sockets are perf/topology.py's reading of the link matrix
(`nvidia-smi topo -m` labels: PIX/PXB = same switch, SYS = other socket).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from autotune.perf.topology import topology
from autotune.specs import HardwareProfile, Plan


@dataclass(frozen=True)
class Slot:
    gpu: int
    phase: str
    replica: int
    stage: int
    dp_rank: int


def placement(plan: Plan) -> dict[int, Slot]:
    slots = {}
    for name, p in plan.phases.items():
        per_stage = p.stage_ranks
        per_replica = per_stage * p.pp
        for k, gpu in enumerate(p.gpus):
            r, within = divmod(k, per_replica)
            s, rank = divmod(within, per_stage)
            slots[gpu] = Slot(gpu, name, r, s, rank // p.tp)
    return slots


@dataclass(frozen=True)
class Group:
    what: str  # e.g. "decode replica 0, stage 0: TP all-reduce"
    gpus: tuple[int, ...]


def groups(plan: Plan) -> list[Group]:
    """The communicating groups of each phase's first replica (the others repeat it on their own GPUs), the
    pipeline hand-offs and the prefill-to-decode KV transfer."""
    out = []
    for name, p in plan.phases.items():
        per_stage, where = p.stage_ranks, "" if name == "both" else f"{name} "
        replica = p.gpus[: per_stage * p.pp]
        for s in range(p.pp):
            stage = replica[s * per_stage : (s + 1) * per_stage]
            at = f"{where}replica 0" + (f", stage {s}" if p.pp > 1 else "")
            if p.tp > 1:
                out.append(Group(f"{at}: TP all-reduce", stage[: p.tp]))
            if p.ep > 1:
                out.append(Group(f"{at}: expert-parallel all-to-all", stage[: p.ep]))
            elif p.dp > 1:
                out.append(Group(f"{at}: DP-attention gather/scatter", stage))
            if s + 1 < p.pp:
                nxt = replica[(s + 1) * per_stage]
                out.append(Group(f"{at}: pipeline hand-off to stage {s + 1}", (stage[-1], nxt)))
    if "prefill" in plan.phases and "decode" in plan.phases:
        pre, dec = plan.phases["prefill"].gpus, plan.phases["decode"].gpus
        out.append(Group("KV transfer prefill -> decode", (pre[0], dec[0])))
    return out


def crossings(hw: HardwareProfile, plan: Plan) -> list[dict]:
    """For each group: the switches and sockets it spans, and which shared links its traffic crosses."""
    topo = topology(hw)
    rows = []
    for g in groups(plan):
        switches = sorted({topo.switch_of[i] for i in g.gpus})
        sockets = sorted({topo.socket_of[i] for i in g.gpus})
        nvlink = all(hw.links[i][j].startswith("NV") for i in g.gpus for j in g.gpus if i != j)
        if nvlink:
            crosses = "NVLink only"
        elif len(sockets) > 1:
            crosses = f"the socket link ({topo.socket_gbs:g} GB/s) and switch uplinks ({topo.uplink_gbs:g} GB/s)"
        elif len(switches) > 1:
            crosses = f"switch uplinks ({topo.uplink_gbs:g} GB/s per direction)"
        else:
            crosses = "nothing shared (one switch)"
        rows.append(
            {
                "group": g.what,
                "GPUs": ",".join(map(str, g.gpus)),
                "switches": len(switches),
                "sockets": len(sockets),
                "crosses": crosses,
            }
        )
    return rows


def bandwidth_source(hw: HardwareProfile) -> str:
    measured = hw.measured is not None and bool(hw.measured.collectives)
    return "measured collectives (probe)" if measured and hw.source == "probe" else f"{hw.source} figures"


PHASE_COLORS = {"both": "#4c72b0", "prefill": "#dd8452", "decode": "#55a868"}


def topology_plot(hw: HardwareProfile, plan: Plan, path: Path) -> Path:
    """The box (sockets, PCIe switches, GPUs, NVLink, link bandwidths) with each GPU labelled by the phase,
    replica, pipeline stage and DP rank the plan gives it."""
    import matplotlib.patches as patches

    from autotune.report.plots import _save, subplots

    topo, slots = topology(hw), placement(plan)
    sockets: dict[int, dict[int, list[int]]] = {}
    for gpu in range(hw.num_gpus):
        sockets.setdefault(topo.socket_of[gpu], {}).setdefault(topo.switch_of[gpu], []).append(gpu)
    per_switch = max(len(g) for sw in sockets.values() for g in sw.values())
    switches = max(len(sw) for sw in sockets.values())
    gw, gap = 1.3, 0.3
    sw_w = per_switch * gw + (per_switch + 1) * gap
    so_w = switches * sw_w + (switches + 1) * gap
    fig, ax = subplots(figsize=(min(14.0, max(8.0, 0.75 * len(sockets) * (so_w + 1.5))), 5.0))
    centers: dict[int, tuple[float, float]] = {}
    for k, sw in enumerate(s for _, s in sorted(sockets.items())):
        x0 = k * (so_w + 1.5)
        ax.add_patch(patches.FancyBboxPatch((x0, 0), so_w, 4.6, boxstyle="round,pad=0.05", fc="#f4f4f4", ec="k"))
        numa = sorted({hw.accelerators[g].numa_node for gs in sw.values() for g in gs})
        where = f"socket {k}, NUMA node {'/'.join(map(str, numa))}"
        ax.text(x0 + so_w / 2, 4.35, where, ha="center", fontsize=10, weight="bold")
        for m, gpus in enumerate(g for _, g in sorted(sw.items())):
            sx = x0 + gap + m * (sw_w + gap)
            ax.add_patch(patches.Rectangle((sx, 0.3), sw_w, 2.9, fc="white", ec="#777", ls="--"))
            ax.text(sx + sw_w / 2, 2.95, "PCIe switch", ha="center", fontsize=8, color="#555")
            ax.plot([sx + sw_w / 2] * 2, [3.2, 4.1], color="#777", lw=2)
            ax.text(sx + sw_w / 2 + 0.05, 3.6, f"uplink {topo.uplink_gbs:.0f} GB/s", fontsize=7, color="#555")
            for n, gpu in enumerate(gpus):
                gx = sx + gap + n * (gw + gap)
                slot = slots.get(gpu)
                color = PHASE_COLORS.get(slot.phase, "#8172b2") if slot else "#cccccc"
                alpha = 1.0 if slot is None or slot.replica % 2 == 0 else 0.6
                ax.add_patch(patches.Rectangle((gx, 0.5), gw, 2.1, fc=color, alpha=alpha, ec="k"))
                text = f"GPU {gpu}\n" + (_slot_text(slot, plan) if slot else "idle")
                ax.text(gx + gw / 2, 1.55, text, ha="center", va="center", fontsize=7, color="white" if slot else "k")
                centers[gpu] = (gx + gw / 2, 2.6)
    if len(sockets) > 1:
        y = 4.75
        ax.annotate("", xy=(so_w + 1.5, y), xytext=(so_w, y), arrowprops={"arrowstyle": "<->", "lw": 2})
        ax.text(so_w + 0.75, y + 0.12, f"socket link\n{topo.socket_gbs:.0f} GB/s", ha="center", fontsize=8)
    for i in range(hw.num_gpus):
        for j in range(i + 1, hw.num_gpus):
            if hw.links[i][j].startswith("NV") and i in centers and j in centers:
                (x1, y1), (x2, y2) = centers[i], centers[j]
                ax.plot([x1, x2], [y1, y2], color="#76b900", lw=1.2, alpha=0.7)
    p2p = all(hw.p2p[i][j] for i in range(hw.num_gpus) for j in range(hw.num_gpus))
    link = topo.gpu_link_gbs[0]
    ax.set_title(
        f"{hw.name}: {plan.describe()[:90]}\nGPU link {link:.0f} GB/s per direction, P2P {'on' if p2p else 'off'}"
        f"{', NVLink (green)' if hw.interconnect != 'pcie' else ', no NVLink'}; bandwidths: {bandwidth_source(hw)}",
        fontsize=9,
    )
    handles = [patches.Patch(color=c, label=k if k != "both" else "aggregated") for k, c in PHASE_COLORS.items()
               if k in plan.phases]  # fmt: skip
    ax.legend(handles=handles, fontsize=8, loc="upper right", bbox_to_anchor=(1.0, -0.02), ncol=len(handles))
    ax.set_xlim(-0.3, len(sockets) * (so_w + 1.5) - 1.2)
    ax.set_ylim(-0.4, 5.3)
    ax.axis("off")
    return _save(fig, path)


def _slot_text(slot: Slot, plan: Plan) -> str:
    p = plan.phases[slot.phase]
    parts = [{"both": "agg", "prefill": "prefill", "decode": "decode"}.get(slot.phase, slot.phase)]
    parts.append(f"replica {slot.replica}")
    if p.pp > 1:
        parts.append(f"stage {slot.stage}")
    if p.dp > 1:
        parts.append(f"dp {slot.dp_rank}")
    return "\n".join(parts)
