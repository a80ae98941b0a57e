"""What one video costs on one replica of a plan: text encoding once, N denoising steps of the DiT (per step one
forward per guidance branch), VAE decode. Pure functions on the box's rates table (perf/rates.py) and collectives
on its link matrix (perf/comm.py, perf/topology.py).

One DiT forward on one GPU of a replica (tokens N = latent frames x h/16 x w/16, n = N / (ulysses x ring)):
- linear layers: 2 x (weights a video token passes through) x n / tp FLOPs at the large-GEMM rate;
- self-attention: 4 x N^2 x d per layer / (sp x tp) x density at the attention rate x the backend's speed;
  Wan cross-attention to the 512 text tokens: 4 x N x T x d per layer / (sp x tp);
- norms, modulation, RoPE, gating: ELEMENTWISE_PASSES reads+writes of n x d bf16 per layer at stream bandwidth;
- Ulysses: per attention layer an all-to-all of q, k, v before and of the output after (3 + 1 tensors of n x d/tp);
- ring: ring-1 hops per layer passing k, v blocks to the next rank, all edges at once on the link matrix,
  overlapped with the block's attention (only the excess shows);
- TP: an all-reduce of n x d after self-attention, cross-attention and the MLP (3 per layer);
- CFG parallel: per step an all-gather of the noise prediction between the two branch groups;
- layerwise offload: the expert's weights / tp copied host-to-device per forward, prefetched under compute; GPUs
  behind one PCIe switch share its uplink.
Rank layout (SGLang's process groups): tp innermost, then ulysses, ring, cfg; replicas outermost. An assumption
read from runtime/server_args/server_args.py:1737-1790 (ulysses is the contiguous inner SP dimension).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

from autotune.perf import comm
from autotune.perf.rates import rates_table
from autotune.perf.topology import ring_order, topology, transfer_s
from autotune.specs import HardwareProfile
from autotune.video.catalog import DiTSpec, expert_steps
from autotune.video.plan import VideoPlan
from autotune.video.rules import attention_backends
from autotune.video.workload import VideoWorkload

GB, GIB, TFLOP = 1e9, 2**30, 1e12
BF16 = 2
# Priors (no public per-kernel figure for these boxes; each labelled):
ELEMENTWISE_PASSES = 24  # reads+writes of the hidden state per DiT layer outside GEMMs/attention (prior)
SDPA_ON_SM12X = 0.85  # fa resolves to Torch SDPA on SM12x (runtime/platforms/cuda.py:520-529); its speed, prior
CONV3D_FRACTION = 0.35  # VAE causal 3D convolutions' share of the dense bf16 peak (prior)
FP32_VS_BF16 = 0.5  # fp32 (TF32) tensor rate / bf16 rate for fp32 components (prior)
H2D_EFFICIENCY = 0.8  # pinned host-to-device copies / raw PCIe (prior, as comm's PCIe efficiency)
REQUEST_OVERHEAD_S = 1.0  # scheduling, latent setup, MP4 encode of the frames (prior)
RUNTIME_RESERVE_GIB = 4.0  # CUDA context, NCCL buffers, allocator slack per GPU (prior)
ACTIVATION_TENSORS = 14  # live n x d bf16 tensors per branch in a DiT forward (prior)
# cache-dit defaults (envs.py:73-78): first Fn=1 block always computed, Bn=0, 4 warm-up steps, residual-diff
# threshold 0.24, at most MC=3 cached steps in a row. How many steps fall under the threshold depends on the
# content; CACHE_HIT_SHARE of the allowed ones is a prior (cache-dit's own Wan2.1 figures report ~1.5-2x).
CACHE_DIT_FN, CACHE_DIT_WARMUP, CACHE_DIT_MC = 1, 4, 3
CACHE_HIT_SHARE = 0.5


@dataclass(frozen=True)
class VideoCost:
    latency_s: float  # one video on an idle replica
    text_s: float
    denoise_s: float
    vae_s: float
    overhead_s: float
    forward_s: dict[str, float]  # one DiT forward on one GPU, by part (compute and exposed communication)
    forwards: float  # DiT forwards each GPU runs per video (steps x branches per group, less cached steps)
    memory_gib: float  # per GPU, peak
    fits: bool
    why_not: str = ""
    provenance: dict[str, str] = field(default_factory=dict)


def _groups(plan: VideoPlan) -> dict[str, tuple[int, ...]]:
    """The process groups of rank 0 (replica 0)."""
    t, u, r = plan.tp, plan.ulysses, plan.ring
    return {
        "tp": tuple(range(t)),
        "ulysses": tuple(k * t for k in range(u)),
        "ring": tuple(k * t * u for k in range(r)),
        "cfg": tuple(k * t * u * r for k in range(plan.cfg)),
    }


@functools.lru_cache(maxsize=4096)
def _comm_s(hw_key, kind: str, group: tuple[int, ...], nbytes: float) -> float:
    hw = hw_key.hw
    if kind == "all2all":
        return comm.all_to_all_s(hw, group, nbytes)
    if kind == "allreduce":
        # SGLang Diffusion's tensor-parallel group runs SGLang's own custom all-reduce dispatch
        # (sglang/multimodal_gen/runtime/distributed/parallel_state.py:250 use_srt_custom_allreduce for "tensor",
        # group_coordinator.py:267-280 dispatch_custom_allreduce), not vLLM's, the comm default
        return comm.all_reduce_s(hw, group, nbytes, engine="sglang")
    return comm.all_gather_s(hw, group, nbytes)


class _Key:
    def __init__(self, hw: HardwareProfile) -> None:
        self.hw = hw

    def __hash__(self) -> int:
        return hash(self.hw.fingerprint)

    def __eq__(self, other) -> bool:
        return isinstance(other, _Key) and other.hw.fingerprint == self.hw.fingerprint


def _ring_hop_s(hw: HardwareProfile, group: tuple[int, ...], nbytes: float) -> float:
    """One ring hop: every rank sends `nbytes` to its neighbour at once (shared uplinks show), plus one send's
    fixed cost (NCCL pair profile)."""
    if len(group) < 2:
        return 0.0
    topo = topology(hw)
    order = ring_order(topo, group)
    traffic = {(order[k], order[(k + 1) % len(order)]): nbytes for k in range(len(order))}
    level = comm.p2p_level(topo, group, comm.nccl_env(None))
    single = max(comm.send_s(hw, a, b, nbytes) for a, b in traffic)
    return max(transfer_s(topo, traffic, level), single)


def _h2d_gbs(hw: HardwareProfile, plan: VideoPlan) -> float:
    """Host-to-device bandwidth one GPU gets when every GPU of the plan streams at once."""
    measured = [v for k, v in (hw.measured.host_copy_gbs if hw.measured else {}).items() if k.startswith("h2d")]
    per_gpu = min(measured) if measured else hw.gpu.pcie_gbs * H2D_EFFICIENCY
    topo = topology(hw)
    used = range(min(plan.gpus, hw.num_gpus))
    sharing = max(sum(1 for g in used if topo.switch_of[g] == s) for s in {topo.switch_of[g] for g in used})
    uplink = topo.uplink_gbs * H2D_EFFICIENCY / max(1, sharing)
    return min(per_gpu, uplink) if sharing > 1 else per_gpu


def forward_parts(plan: VideoPlan, model: DiTSpec, work: VideoWorkload, hw: HardwareProfile) -> dict[str, float]:
    """Seconds of one DiT forward (one branch, one expert) on one GPU of the replica, by part."""
    table = rates_table(hw)
    gemm = table.get("gemm", "bf16", "m>1024").tflops * TFLOP
    att_rate = table.get("attention", "bf16", "prefill").tflops * TFLOP
    stream = table.get("elementwise", "bf16", "any").gbs * GB
    backend = next(b for b in attention_backends(_cc(hw)) if b.name == plan.attention)
    speed = backend.speed_vs_dense * (SDPA_ON_SM12X if plan.attention == "fa" and _cc(hw) >= 12.0 else 1.0)
    d, layers = model.hidden, model.double_layers + model.single_layers
    n_video = work.latent_tokens(model)
    joint = n_video + (model.text_tokens if model.family != "wan" else 0)  # hunyuan attends over video + text
    n = joint / plan.sp
    linear = 2 * model.linear_params_per_token * n / plan.tp
    text_kv = 2 * 2 * d * d * model.text_tokens * model.double_layers / plan.tp if model.family == "wan" else 0.0
    parts = {"linear": (linear + text_kv) / gemm}
    self_attn = layers * 4 * joint * joint * d / (plan.sp * plan.tp) * plan.density
    parts["attention"] = self_attn / (att_rate * speed)
    if model.family == "wan":
        parts["cross_attention"] = layers * 4 * joint * model.text_tokens * d / (plan.sp * plan.tp) / att_rate
    parts["elementwise"] = layers * ELEMENTWISE_PASSES * n * d * BF16 / plan.tp / stream
    groups, key = _groups(plan), _Key(hw)
    shard_bytes = n * d / plan.tp * BF16  # one n x d/tp bf16 tensor
    if plan.ulysses > 1:
        parts["ulysses_all2all"] = layers * 4 * _comm_s(key, "all2all", groups["ulysses"], shard_bytes)
    if plan.ring > 1:
        kv_bytes = 2 * (joint / plan.ring) * d / (plan.tp * plan.ulysses) * BF16
        hop = _ring_hop_s(hw, groups["ring"], kv_bytes)
        block_attn = parts["attention"] / plan.ring  # attention of one k/v block, under which the hop runs
        parts["ring_p2p"] = layers * (plan.ring - 1) * max(0.0, hop - block_attn)
    if plan.tp > 1:
        parts["tp_allreduce"] = layers * 3 * _comm_s(key, "allreduce", groups["tp"], n * d * BF16)
    if plan.dit_offload:
        copy = model.dit_params * BF16 / plan.tp / (_h2d_gbs(hw, plan) * GB)
        compute = sum(parts.values())
        parts["offload_h2d"] = max(0.0, copy - compute) + copy / layers  # prefetch hides all but the excess + 1 layer
    return parts


def _cc(hw: HardwareProfile) -> float:
    from autotune.capability.facts import compute_capability

    return compute_capability(hw.gpu.arch)


def dit_forwards(plan: VideoPlan, model: DiTSpec, work: VideoWorkload) -> tuple[float, float]:
    """(full forwards, cached forwards) each GPU runs per video: steps x guidance branches on its group; with
    cache-dit, per expert: 4 warm-up steps computed, then at most 3 of every 4 steps cached x CACHE_HIT_SHARE."""
    branches = (2 if work.cfg else 1) / (plan.cfg if work.cfg else 1)
    full = cached = 0.0
    for steps in expert_steps(model, work.steps):
        hits = 0.0
        if plan.cache_dit:
            hits = max(0, steps - CACHE_DIT_WARMUP) * CACHE_DIT_MC / (CACHE_DIT_MC + 1) * CACHE_HIT_SHARE
        full += (steps - hits) * branches
        cached += hits * branches
    return full, cached


def vae_decode_s(model: DiTSpec, work: VideoWorkload, hw: HardwareProfile) -> float:
    """The VAE decoder on one GPU (Wan: vae_sp False, configs/pipeline_configs/wan.py:87): causal 3x3x3 convolutions
    per up stage over its share of the output voxels (stage k at 2^-(stages-1-k) spatial scale, the first two at
    1/4 and 1/2 of the frames)."""
    vae = model.vae
    stages = len(vae.decoder_channels)
    voxels = work.frames * work.height * work.width
    flops = 0.0
    for k, ch in enumerate(vae.decoder_channels):
        spatial = 4.0 ** -(stages - 1 - k)
        temporal = (0.25, 0.5)[k] if k < 2 else 1.0
        flops += vae.convs_per_stage * 2 * 27 * ch * ch * spatial * temporal * voxels
    rate = hw.gpu.peak_tflops.get("bf16", 0.0) * TFLOP * CONV3D_FRACTION
    if model.vae_fp32:
        rate *= FP32_VS_BF16
    return flops / rate


def text_encode_s(model: DiTSpec, work: VideoWorkload, hw: HardwareProfile, plan: VideoPlan | None = None) -> float:
    """Encoding the prompt (and the negative prompt under CFG) on one GPU; with --text-encoder-cpu-offload the
    weights are copied host-to-device for each request first (not overlapped)."""
    te = model.text_encoder
    copy = te.params * te.bytes_per_param / (_h2d_gbs(hw, plan) * GB) if plan and plan.text_encoder_offload else 0.0
    prompts = 2 if work.cfg else 1  # the negative prompt too
    rate = rates_table(hw).get("gemm", "bf16", "m>1024").tflops * TFLOP
    if te.bytes_per_param == 4:
        rate *= FP32_VS_BF16
    return copy + 2 * te.params * te.tokens * prompts / rate


def memory_gib(plan: VideoPlan, model: DiTSpec, work: VideoWorkload) -> float:
    """Peak per GPU: DiT weights (all experts resident, configs/pipeline_configs/wan.py:296 keep_resident dit,
    or two prefetched layers when streamed), the text encoder, VAE, activations, runtime reserve."""
    layers = model.double_layers + model.single_layers
    dit = model.dit_params * BF16 / plan.tp
    weights = 2 * dit / layers if plan.dit_offload else dit * model.experts
    encoder = model.text_encoder.params * model.text_encoder.bytes_per_param
    n = work.latent_tokens(model) / plan.sp
    branches = (2 if work.cfg else 1) / (plan.cfg if work.cfg else 1)
    activations = ACTIVATION_TENSORS * n * model.hidden * BF16 / plan.tp * branches
    # an offloaded encoder is on the GPU only while it encodes, before the DiT's activations exist
    transient = max(encoder, activations) if plan.text_encoder_offload else encoder + activations
    vae_work = 4 * work.height * work.width * model.vae.decoder_channels[-1] * 4 * 2  # a causal chunk, 4 tensors
    return (weights + transient + vae_work) / GIB + RUNTIME_RESERVE_GIB


def video_cost(plan: VideoPlan, model: DiTSpec, work: VideoWorkload, hw: HardwareProfile) -> VideoCost:
    parts = forward_parts(plan, model, work, hw)
    full, cached = dit_forwards(plan, model, work)
    forward_s = sum(parts.values())
    cached_s = forward_s * CACHE_DIT_FN / (model.double_layers + model.single_layers)
    denoise = full * forward_s + cached * cached_s
    if plan.cfg > 1 and work.cfg:
        latent_bytes = work.latent_tokens(model) * model.in_channels * 4 * 4  # fp32 noise prediction (patch 1x2x2)
        denoise += work.steps * _comm_s(_Key(hw), "allgather", _groups(plan)["cfg"], latent_bytes)
    text, vae = text_encode_s(model, work, hw, plan), vae_decode_s(model, work, hw)
    mem = memory_gib(plan, model, work)
    capacity = hw.gpu.memory_gib
    fits = mem <= capacity * 0.95 and plan.gpus <= hw.num_gpus
    why = "" if fits else f"needs {mem:.0f} GiB per GPU, the GPU has {capacity:.0f}"
    return VideoCost(
        latency_s=REQUEST_OVERHEAD_S + text + denoise + vae,
        text_s=text,
        denoise_s=denoise,
        vae_s=vae,
        overhead_s=REQUEST_OVERHEAD_S,
        forward_s=parts,
        forwards=full + cached,
        memory_gib=mem,
        fits=fits,
        why_not=why,
        provenance=_provenance(hw),
    )


def _provenance(hw: HardwareProfile) -> dict[str, str]:
    from autotune.perf.rates import collective_provenance

    table = rates_table(hw)
    return {
        "gemm/bf16/m>1024": table.get("gemm", "bf16", "m>1024").provenance,
        "attention/bf16/prefill": table.get("attention", "bf16", "prefill").provenance,
        "elementwise/bf16/any": table.get("elementwise", "bf16", "any").provenance,
        "collective": collective_provenance(hw),
        "vae conv3d, sparse/quantised attention speed, cache-dit hit share, offload overlap": "prior",
    }
