"""The costing pass: an op list's time on the box's rates table (perf/rates.py) and its collectives on the topology
(perf/comm.py), accumulated in a Cost. `cost_ops` costs and adds in one pass; `_op_terms` / `_add_terms` split
it in two (each op's seconds before the `times` scaling, then the same additions in the same order), so that
perf/halves.py can remember the terms across plans and predictions stay bit-identical."""

from __future__ import annotations

from dataclasses import dataclass, field

from autotune.perf import ascend, comm
from autotune.perf.comm_fused import fused_allreduce_norm_fn
from autotune.perf.opcore import ADD_NORM_PASSES, DENSE_W4A16, FUSED_ALLREDUCE, Context, Op
from autotune.specs.hardware import on_fabric

GB = 1e9
TFLOP = 1e12
NORM_KEY = ("norm", "bf16", "fused_add")  # the rates key of the residual add + RMSNorm kernel (oplist.ffn_norm_ops)
MEMO_MAX = 4096  # entries of each per-Context memo (all-reduces, FFN halves) before it is cleared


@dataclass(eq=False, slots=True)
class Cost:
    """A costed op list's seconds. `by_rate` (seconds per rates-table key) is summed only when read: `add` and
    `_add_terms` note each addition in `parts` (a Cost or an _op_terms tuple, then its `times`: a flat list, no
    pair objects for the garbage collector to walk), and reading `by_rate` replays the notes in order with the
    float operations an eager sum does, so it is bit-identical to one; a step whose rates nobody reads (most
    steps of a prediction: ops.step_fn's `pending`) skips the sums."""

    compute_s: float = 0.0
    memory_s: float = 0.0  # memory-bound (or minimum-latency-bound) time beyond the compute time of the same ops
    comm_s: dict[str, float] = field(default_factory=dict)
    overlap_saved_s: float = 0.0
    parts: list = field(default_factory=list, repr=False)  # Cost or op terms, times, ...: not yet in `by_rate`
    _by_rate: dict | None = field(default=None, repr=False)  # the replayed part of by_rate (made when first read)

    def __init__(self) -> None:
        """A zero Cost. Written out (the dataclass keeps it): the generated __init__ takes every field as an argument,
        checks each default factory's sentinel and calls dict() and list(); a V4.1 prediction makes ~18 Costs."""
        self.compute_s = 0.0
        self.memory_s = 0.0
        self.comm_s = {}
        self.overlap_saved_s = 0.0
        self.parts = []
        self._by_rate = None

    def add_comm(self, name: str, seconds: float) -> None:
        if seconds > 0:
            self.comm_s[name] = self.comm_s.get(name, 0.0) + seconds

    def add(self, other: Cost, times: float = 1.0) -> None:
        self.compute_s += other.compute_s * times
        self.memory_s += other.memory_s * times
        self.overlap_saved_s += other.overlap_saved_s * times
        comm_s = self.comm_s
        for name, seconds in other.comm_s.items():
            seconds *= times
            if seconds > 0:  # add_comm, inlined: this runs for every layer kind of every step
                comm_s[name] = comm_s.get(name, 0.0) + seconds
        self.parts += other, times

    @property
    def by_rate(self) -> dict[tuple[str, str, str], float]:
        """(class, dtype, bucket) -> seconds: the noted additions replayed, each key's sum in the order added."""
        by_rate = self._by_rate
        if by_rate is None:
            by_rate = self._by_rate = {}
        parts = self.parts
        if parts:
            notes, get = iter(parts), by_rate.get
            for what, times in zip(notes, notes, strict=True):  # (what, times) pairs
                if type(what) is tuple:  # _add_terms' op terms: by_rate += seconds * times, op by op
                    for key, _, seconds, _ in what:
                        by_rate[key] = get(key, 0.0) + seconds * times
                else:  # add: the other Cost's by_rate, times over
                    for key, seconds in what.by_rate.items():
                        by_rate[key] = get(key, 0.0) + seconds * times
            parts.clear()
        return by_rate

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Cost):
            return NotImplemented
        mine = (self.compute_s, self.memory_s, self.comm_s, self.overlap_saved_s, self.by_rate)
        return mine == (other.compute_s, other.memory_s, other.comm_s, other.overlap_saved_s, other.by_rate)

    @property
    def time_s(self) -> float:
        return self.compute_s + self.memory_s + sum(self.comm_s.values()) - self.overlap_saved_s


def collective_s(c: Context, op: Op) -> tuple[str, float]:
    """(name it is reported under, seconds) of a collective op on the topology (comm.py): _collective_s of its
    collective (Op.bucket), group and bytes."""
    _, _, name, _, _, _, _, nbytes, _, _, _, group = op
    return _collective_s(c, name, group, nbytes)


def _collective_s(c: Context, name: str, group: tuple[int, ...], nbytes: float) -> tuple[str, float]:
    """collective_s of collective `name` on `group` moving `nbytes` (_op_terms passes the fields it unpacked: no
    NamedTuple field reads). All-reduces are remembered per Context by group and bytes (every layer kind of a step
    issues the same ones); the other collectives are linear in bytes on their group (comm.nccl_cost_fn). Cost
    functions: _comm_fn."""
    if name == "allreduce" or name == FUSED_ALLREDUCE:
        key = (group, nbytes, name)
        hit = c.allreduce_memo.get(key)
        if hit is None:
            fn = c.comm_fns.get((name, group)) or _comm_fn(c, name, group)
            algo, seconds, *norm_kernel = fn(nbytes)  # the fused kernel's cost also says if a norm kernel stays
            seconds *= c.table.collective_scale
            if norm_kernel and norm_kernel[0]:  # the norm's own kernel, priced as ffn_norm_ops prices one (oplist)
                _, bytes_per_s, min_s, _ = c.rate_terms.get(NORM_KEY) or _rate_terms(c, NORM_KEY)
                seconds += ADD_NORM_PASSES * nbytes / bytes_per_s + min_s
            if len(c.allreduce_memo) >= MEMO_MAX:
                c.allreduce_memo.clear()
            hit = c.allreduce_memo[key] = (_ALLREDUCE_NAMES.get(algo) or _allreduce_name(algo), seconds)
        return hit
    fn = c.comm_fns.get((name, group)) or _comm_fn(c, name, group)
    return name, fn(nbytes) * c.table.collective_scale


_ALLREDUCE_NAMES: dict[str, str] = {}  # all-reduce algorithm -> the name it is reported under, one string each


def _allreduce_name(algo: str) -> str:
    name = _ALLREDUCE_NAMES[algo] = f"allreduce:{algo}"
    return name


class BoundedMemo(dict):
    """A dict cleared whenever it reaches `max_entries` before an insert: results never change, only recompute."""

    def __init__(self, max_entries: int) -> None:
        super().__init__()
        self.max_entries = max_entries

    def put(self, key, value):
        if len(self) >= self.max_entries:
            self.clear()
        self[key] = value
        return value

    def cache_clear(self) -> None:
        self.clear()


COMM_FN_MEMO_MAX = 1024  # collective cost functions remembered across Contexts (_comm_fn)
_COMM_FNS = BoundedMemo(COMM_FN_MEMO_MAX)  # (id(box), collective, group, what the function reads) -> (box, fn)


def _comm_fn(c: Context, name: str, group: tuple[int, ...]):
    """The Context's cost function of collective `name` on `group` (comm.all_reduce_fn, comm.nccl_cost_fn: ~5 us to
    build), remembered across Contexts by what it reads: the box (by identity, kept alive by the entry), the
    group and the NCCL environment; for the all-reduce also the algorithm, the PCIe-IPC size limit and the engine.
    Contexts of different plans on the same GPUs and settings share one (the functions are pure)."""
    if name == "allreduce" or name == FUSED_ALLREDUCE:
        key = (id(c.hw), name, group, c.nccl, c.phase.comm.allreduce, c.ipc_max, c.engine)
    else:
        key = (id(c.hw), name, group, c.nccl)
    hit = _COMM_FNS.get(key)
    if hit is None or hit[0] is not c.hw:
        if name == "allreduce":
            fn = comm.all_reduce_fn(c.hw, group, c.phase.comm, c.ipc_max, c.engine)
        elif name == FUSED_ALLREDUCE:
            fn = fused_allreduce_norm_fn(c.hw, group, c.phase.comm, c.ipc_max, c.engine)
        else:
            fn = comm.nccl_cost_fn(c.hw, name, group, c.nccl)
        hit = _COMM_FNS.put(key, (c.hw, fn))
    fn = c.comm_fns[(name, group)] = hit[1]
    return fn


def collective_term(c: Context, op: Op) -> tuple:
    """_op_terms(c, [op])[0] for one collective op, without the op loop: the LM head's logits all-gather, costed
    for each step's rows (perf/halves.py _head_terms)."""
    name, seconds = collective_s(c, op) if c.platform is None else _hccl_s(c, op, c.platform)
    return ((c.rate_terms.get(op[:3]) or _rate_terms(c, op[:3]))[3], name, seconds, 0.0)


def _hccl_s(c: Context, op: Op, platform: dict[str, str]) -> tuple[str, float]:
    """vllm-ascend collectives: HCCL on the group's HCCS mesh or PCIe path (perf/ascend.py)."""
    hw, group = c.hw, op.group
    pairs = [(i, j) for i in group for j in group if i != j]
    fabric = bool(pairs) and all(on_fabric(hw.links[i][j]) for i, j in pairs)
    if fabric:
        gbs = min(hw.accelerators[i].nvlink_gbs for i in group)
    else:
        gbs = min(hw.accelerators[i].pcie_gbs for i in group)
        labels = {hw.links[i][j] for i, j in pairs}
        if "PIX" in labels and hw.pcie_switch_uplink_gbs:  # chips behind one card switch share its uplink
            gbs = min(gbs, hw.pcie_switch_uplink_gbs / 2)
        if "SYS" in labels and hw.host.inter_socket_gbs:
            gbs = min(gbs, hw.host.inter_socket_gbs)
    seconds = ascend.hccl_s(op.bucket, op.nbytes, len(group), fabric, gbs, platform) * c.table.collective_scale
    return f"hccl:{op.bucket}", seconds


def _rate_terms(c: Context, key: tuple[str, str, str]) -> tuple[float, float, float, tuple[str, str, str]]:
    """(FLOP/s, B/s, minimum seconds of one kernel, the key) of a rates-table key, remembered per Context; a grouped
    MoE's bandwidth at most the Context's cap on the experts' weight stream (Context.moe_stream_gbs: Marlin's SMs),
    a W4A16 checkpoint's dense GEMM's (dtype opcore.DENSE_W4A16; the table gives it bf16's rates) at most
    Context.dense_stream_gbs. A collective's key gets no rates (it is costed on the topology: collective_s). The
    key comes back as the one object the op terms of the Context share (_op_terms), not a fresh slice of each op:
    the memos hold fewer objects for the garbage collector to walk."""
    if key[0] == "collective":
        terms = c.rate_terms[key] = (0.0, 0.0, 0.0, key)
        return terms
    r = c.table.get(*key)
    gbs = min(r.gbs, c.moe_stream_gbs) if key[0] == "grouped_moe" and c.moe_stream_gbs else r.gbs
    if key[1] == DENSE_W4A16 and c.dense_stream_gbs:
        gbs = min(gbs, c.dense_stream_gbs)
    terms = c.rate_terms[key] = (r.tflops * TFLOP, gbs * GB, r.min_us * 1e-6, key)
    shared_rate_terms(c)[key] = terms
    return terms


RATE_TERMS_MEMO_MAX = 64  # rates tables and stream caps whose rate terms are shared across Contexts
_RATE_TERMS = BoundedMemo(RATE_TERMS_MEMO_MAX)  # (id(table), moe cap, dense cap) -> (the table, key -> terms)


def shared_rate_terms(c: Context) -> dict:
    """The rate terms (_rate_terms) of every Context of the same rates table (by identity, kept alive by the entry)
    and weight-stream caps (Context.moe_stream_gbs, dense_stream_gbs): all that _rate_terms reads of it. ops.step_fn
    copies them into a new Context's rate_terms (one dict update, no _rate_terms call per key and Context)."""
    key = (id(c.table), c.moe_stream_gbs, c.dense_stream_gbs)
    hit = _RATE_TERMS.get(key)
    if hit is None or hit[0] is not c.table:
        hit = _RATE_TERMS.put(key, (c.table, {}))
    return hit[1]


def cost_ops(c: Context, ops: list[Op], into: Cost | None = None, times: float = 1.0) -> Cost:
    """The costing pass: op time = count x the kernel's fixed latency (launch, prologue, tail: the rate's
    `min_us`) + max(flops / rate / kernel speed, bytes / bandwidth), the kernel-variant speed dividing the memory
    term too for attention only (a GEMM / grouped-MoE variant streams the same weights at the same bandwidth);
    collectives on the topology (comm.py). Adds `times` x the ops' cost to `into` (a new Cost when None) and
    returns it: a step accumulates its layer kinds without intermediate Costs."""
    return _add_terms(Cost() if into is None else into, _op_terms(c, ops), times)


def _op_terms(c: Context, ops: list[Op]) -> tuple[tuple, ...]:
    """cost_ops's per-op arithmetic before the `times` scaling, one (key, collective name or None, seconds,
    compute seconds) per op: _add_terms adds them as cost_ops adds the ops (same float operations, same order)."""
    platform = c.platform
    if platform is not None:  # vllm-ascend: its kernel speed and share applied to each op first (_ascend_ops)
        ops = _ascend_ops(c, ops, platform)
    terms, out = c.rate_terms, []
    append = out.append
    for op in ops:
        kind, dtype, bucket, _, _, _, flops, nbytes, count, _, speed, group = op  # one unpacking, no attribute reads
        flops_per_s, bytes_per_s, min_s, key = terms.get((kind, dtype, bucket)) or _rate_terms(c, op[:3])
        if kind == "collective":
            name, seconds = _collective_s(c, bucket, group, nbytes) if platform is None else _hccl_s(c, op, platform)
            append((key, name, seconds, 0.0))
            continue
        # (x / 1.0 is x exactly: a non-attention op's memory speed is left out, the same floats)
        t_compute = flops / flops_per_s / speed if flops else 0.0
        t_memory = nbytes / bytes_per_s / speed if kind == "attention" else nbytes / bytes_per_s
        append((key, None, (t_memory if t_memory > t_compute else t_compute) + min_s * count, t_compute))
    return tuple(out)


_COLLECTIVE_KEYS: dict[str, tuple[str, str, str]] = {}  # collective name -> its rates-table key, one object a name


def collective_terms(c: Context, ops: list[Op], comm_s: dict[str, float]) -> tuple[tuple, ...]:
    """_op_terms(c, ops) of collective ops only, off vllm-ascend (ops._shared_ffn_cost: oplist.ffn_comm_ops), each
    term's seconds above 0 also added to `comm_s` in order (what _add_terms adds of them at times 1.0), without
    _op_terms' kernel arithmetic and rates lookup: a collective's term is (its key, name, seconds, 0.0)."""
    keys, out = _COLLECTIVE_KEYS, []
    append = out.append
    for op in ops:
        bucket = op[2]  # Op.bucket: the collective
        key = keys.get(bucket)
        if key is None:
            key = keys[bucket] = ("collective", "", bucket)
        name, seconds = _collective_s(c, bucket, op[11], op[7])  # Op.group, Op.nbytes
        append((key, name, seconds, 0.0))
        if seconds > 0:
            comm_s[name] = comm_s.get(name, 0.0) + seconds
    return tuple(out)


def _ascend_ops(c: Context, ops: list[Op], platform: dict[str, str]) -> list[Op]:
    """`ops` on vllm-ascend: each kernel op's speed times its kernel speed there (ascend.op_speed), its FLOPs and
    bytes times the share of them it runs (ascend.op_share); collectives as they are (costed by _hccl_s)."""
    tp = c.phase.tp
    out = []
    for op in ops:
        if op.kind != "collective":
            share = ascend.op_share(platform, op.kind, tp)
            speed = op.speed * ascend.op_speed(platform, op.kind, op.dtype, tp)
            op = op._replace(flops=op.flops * share, nbytes=op.nbytes * share, speed=speed)
        out.append(op)
    return out


def _add_terms(cost: Cost, op_terms: tuple[tuple, ...], times: float) -> Cost:
    """Add `times` x the ops of `op_terms` (_op_terms) to `cost`, exactly as cost_ops adds them (their by_rate
    seconds noted in cost.parts, summed when read)."""
    comm_s = cost.comm_s
    compute_s = memory_s = 0.0
    if times == 1.0:  # x * 1.0 is x exactly: the same sums without the scaling (the FFN halves, the LM head)
        for _, name, seconds, t_compute in op_terms:
            if name is not None:
                if seconds > 0:
                    comm_s[name] = comm_s.get(name, 0.0) + seconds
            else:
                compute_s += t_compute
                memory_s += seconds - t_compute
    else:
        for _, name, seconds, t_compute in op_terms:
            if name is not None:
                seconds *= times
                if seconds > 0:
                    comm_s[name] = comm_s.get(name, 0.0) + seconds
            else:  # (seconds x times) - (t_compute x times): the products scaling each term first made
                t_compute *= times
                compute_s += t_compute
                memory_s += seconds * times - t_compute
    cost.compute_s += compute_s
    cost.memory_s += memory_s
    cost.parts += op_terms, times
    return cost
