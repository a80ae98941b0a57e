"""Video diffusion models: the fields of their public Diffusers configs (transformer, text encoder, VAE) and the
parameter arithmetic over them. SGLang Diffusion paths are relative to sglang/multimodal_gen/ of the 0.5.23 wheel.

Sources of the config values (Hugging Face, read through the search tools):
- Wan2.2-T2V-A14B: huggingface.co/Wan-AI/Wan2.2-T2V-A14B-Diffusers transformer/config.json and
  transformer_2/config.json (d 5120, 40 heads x 128, ffn 13824, 40 layers, patch [1,2,2], text_dim 4096); boundary
  0.875, shift 12, 40 steps, guidance (3.0, 4.0): github.com/Wan-Video/Wan2.2 wan/configs/wan_t2v_A14B.py.
- Wan2.1-T2V-14B: huggingface.co/Wan-AI/Wan2.1-T2V-14B-Diffusers (model_index.json: WanTransformer3DModel,
  UMT5EncoderModel, AutoencoderKLWan); the transformer config is the same shape (diffusers
  scripts/convert_wan_to_diffusers.py, PR #12004: Wan 14B = d 5120 / 40 layers / ffn 13824).
- UMT5-XXL encoder (both Wan): vocab 256384, d_model 4096, d_ff 10240, 64 heads x d_kv 64, 24 layers.
- Wan VAE (AutoencoderKLWan): base_dim 96, dim_mult [1,2,4,4], num_res_blocks 2, z_dim 16, strides (4, 8, 8).
- HunyuanVideo (hunyuanvideo-community/HunyuanVideo, HunyuanVideoTransformer3DModel): hidden 3072 = 24 heads x 128,
  20 double-stream + 40 single-stream blocks, mlp_ratio 4, patch 2 (t 1), text_embed_dim 4096, pooled 768, 2
  token-refiner layers; text encoder llava-llama-3-8b + CLIP-L; VAE block_out_channels [128,256,512,512].
  SGLang's own copy: configs/models/dits/hunyuanvideo.py; sampling defaults configs/sample/hunyuan.py:11-19.

Published totals the tests check the arithmetic against (`published_*`, with their source) are rounded figures.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from autotune.specs import MiTuneError


@dataclass(frozen=True)
class TextEncoderSpec:
    name: str
    params: float  # from its config (arithmetic below)
    tokens: int  # padded prompt length the pipeline encodes
    bytes_per_param: int  # precision SGLang loads it in
    published_params: float
    published_source: str


@dataclass(frozen=True)
class VaeSpec:
    name: str
    z_dim: int
    temporal_stride: int
    spatial_stride: int
    decoder_channels: tuple[int, ...]  # per up stage, lowest resolution first
    convs_per_stage: int  # 3x3x3 causal convolutions per up stage ((res blocks + 1) x 2)
    bytes_per_value: int  # decode precision


@dataclass(frozen=True)
class DiTSpec:
    name: str
    hf_id: str
    family: str  # wan | hunyuanvideo
    pipeline: str  # SGLang pipeline config class
    hidden: int
    heads: int
    head_dim: int
    ffn_dim: int
    double_layers: int  # wan: all its blocks (self-attn + cross-attn + FFN); hunyuan: joint double-stream blocks
    single_layers: int  # hunyuan single-stream blocks; 0 for wan
    patch: tuple[int, int, int]  # (t, h, w)
    in_channels: int
    text_dim: int
    text_tokens: int  # tokens the DiT attends to (wan cross-attn: 512; hunyuan joins 256 text tokens)
    refiner_layers: int
    experts: int  # Wan2.2 A14B: 2 DiTs of the same shape, switched by step (boundary_ratio)
    boundary_ratio: float
    flow_shift: float
    default_steps: int
    default_guidance: float  # > 1: classifier-free guidance (two branches per step)
    default_frames: int
    text_encoder: TextEncoderSpec
    vae: VaeSpec
    published_dit_params: float  # per expert
    published_total_params: float  # all experts
    published_source: str
    vae_fp32: bool = False  # decode in fp32 (Wan2.2 A14B: configs/pipeline_configs/wan.py:284)

    @property
    def dit_params(self) -> float:
        """One expert's parameters, from the config (Diffusers module layout)."""
        return dit_params(self)

    @property
    def total_params(self) -> float:
        return self.dit_params * self.experts

    @property
    def linear_params_per_token(self) -> float:
        """Weights every video token multiplies through in one forward (2 FLOPs each per token)."""
        d, f = self.hidden, self.ffn_dim
        if self.family == "wan":  # self-attn qkvo + cross-attn q and o (k/v act on text tokens) + FFN
            return self.double_layers * (4 * d * d + 2 * d * d + 2 * d * f)
        # hunyuan: double block image stream qkvo + MLP (4x) + adaLN; single block linear1 (3d + 4d) + linear2 (5d)
        return self.double_layers * (4 * d * d + 2 * d * f) + self.single_layers * (3 * d * d + 2 * d * f + d * d)


def dit_params(m: DiTSpec) -> float:
    d, f = m.hidden, m.ffn_dim
    pt, ph, pw = m.patch
    patch_in = m.in_channels * pt * ph * pw * d + d
    proj_out = d * m.in_channels * pt * ph * pw + m.in_channels * pt * ph * pw
    if m.family == "wan":
        block = 8 * (d * d + d) + 4 * d + 2 * d + (d * f + f + f * d + d) + 6 * d  # attn1, attn2, norms, ffn, table
        embed = (256 * d + d) + (d * d + d) + (d * 6 * d + 6 * d) + (m.text_dim * d + d) + (d * d + d) + 2 * d
        return m.double_layers * block + embed + patch_in + proj_out
    # HunyuanVideo (diffusers transformer_hunyuan_video.py layout)
    double = 2 * (d * 6 * d + 6 * d) + 8 * (d * d + d) + 2 * (d * f + f + f * d + d) + 4 * m.head_dim
    single = (d * 3 * d + 3 * d) + (d * f + f) + 3 * (d * d + d) + ((d + f) * d + d) + 2 * m.head_dim
    refiner = 2 * d + 4 * (d * d + d) + 2 * d + (d * f + f + f * d + d) + (d * 2 * d + 2 * d)
    embed = (m.text_dim * d + d) + sum((k * d + d) + (d * d + d) for k in (256, 256, 768, 256))  # refiner t, t, text, g
    norm_out = d * 2 * d + 2 * d
    return (
        m.double_layers * double + m.single_layers * single + m.refiner_layers * refiner + embed + norm_out
        + patch_in + proj_out
    )  # fmt: skip


def umt5_encoder_params(vocab: int, d: int, d_ff: int, heads: int, d_kv: int, layers: int) -> float:
    """UMT5 encoder: shared embedding, per layer q/k/v/o, gated-GELU FFN (wi_0, wi_1, wo), 2 RMSNorms and a
    per-layer relative position bias (32 buckets x heads)."""
    inner = heads * d_kv
    per_layer = 4 * d * inner + 3 * d * d_ff + 2 * d + 32 * heads
    return vocab * d + layers * per_layer + d


# Published: the Wan2.1 repository ships the encoder as models_t5_umt5-xxl-enc-bf16.pth, 11.4 GB in bf16 (HF file
# listing of Wan-AI/Wan2.1-T2V-14B) -> 5.7e9 parameters.
UMT5_XXL = TextEncoderSpec(
    name="umt5-xxl-encoder",
    params=umt5_encoder_params(256384, 4096, 10240, 64, 64, 24),
    tokens=512,  # configs/models/dits/wanvideo.py text_len = 512
    bytes_per_param=4,  # configs/pipeline_configs/wan.py:104 text_encoder_precisions ("fp32",)
    published_params=5.7e9,
    published_source="HF Wan-AI/Wan2.1-T2V-14B: models_t5_umt5-xxl-enc-bf16.pth 11.4 GB at 2 bytes/param",
)
# llava-llama-3-8b (Llama-3-8B: 8.03e9, Meta model card) + CLIP ViT-L/14 text tower (1.23e8, openai/clip-vit-large)
LLAVA_LLAMA3_CLIP = TextEncoderSpec(
    name="llava-llama-3-8b+clip-l",
    params=8.03e9 + 1.23e8,
    tokens=256,  # HunyuanVideo text_encoder max_length 256 (+77 CLIP)
    bytes_per_param=2,
    published_params=8.03e9 + 1.23e8,
    published_source="Meta Llama-3-8B model card (8.03B); openai/clip-vit-large-patch14 text model (123M)",
)
WAN_VAE = VaeSpec("wan-vae", 16, 4, 8, (384, 384, 192, 96), 6, 2)
HUNYUAN_VAE = VaeSpec("hunyuanvideo-vae", 16, 4, 8, (512, 512, 256, 128), 6, 2)

_WAN_14B = dict(
    family="wan", hidden=5120, heads=40, head_dim=128, ffn_dim=13824, double_layers=40, single_layers=0,
    patch=(1, 2, 2), in_channels=16, text_dim=4096, text_tokens=512, refiner_layers=0,
    text_encoder=UMT5_XXL, vae=WAN_VAE, default_frames=81,
)  # fmt: skip

VIDEO_MODELS = {
    "wan2.2-t2v-a14b": DiTSpec(
        name="wan2.2-t2v-a14b",
        hf_id="Wan-AI/Wan2.2-T2V-A14B-Diffusers",
        pipeline="Wan2_2_T2V_A14B_Config",  # configs/pipeline_configs/wan.py:281-298
        experts=2,
        boundary_ratio=0.875,  # configs/pipeline_configs/wan.py:283
        flow_shift=12.0,  # configs/pipeline_configs/wan.py:282
        default_steps=40,  # configs/sample/wan.py:241
        default_guidance=4.0,  # configs/sample/wan.py:239-240 (4.0 high noise, 3.0 low noise)
        published_dit_params=14e9,
        published_total_params=27e9,
        published_source="Wan-AI/Wan2.2-T2V-A14B model card: 27B total, 14B active per step (two experts)",
        vae_fp32=True,
        **_WAN_14B,
    ),
    "wan2.1-t2v-14b": DiTSpec(
        name="wan2.1-t2v-14b",
        hf_id="Wan-AI/Wan2.1-T2V-14B-Diffusers",
        pipeline="WanT2V720PConfig",  # configs/pipeline_configs/wan.py:166-173
        experts=1,
        boundary_ratio=0.0,
        flow_shift=5.0,  # configs/pipeline_configs/wan.py:172
        default_steps=50,  # configs/sample/wan.py:94
        default_guidance=5.0,  # configs/sample/wan.py:92
        published_dit_params=14e9,
        published_total_params=14e9,
        published_source="Wan-AI/Wan2.1-T2V-14B model card: 14B",
        **_WAN_14B,
    ),
    "hunyuanvideo": DiTSpec(
        name="hunyuanvideo",
        hf_id="hunyuanvideo-community/HunyuanVideo",
        family="hunyuanvideo",
        pipeline="HunyuanConfig",  # configs/pipeline_configs/hunyuan.py
        hidden=3072,
        heads=24,
        head_dim=128,
        ffn_dim=4 * 3072,
        double_layers=20,
        single_layers=40,
        patch=(1, 2, 2),
        in_channels=16,
        text_dim=4096,
        text_tokens=256,
        refiner_layers=2,
        experts=1,
        boundary_ratio=0.0,
        flow_shift=7.0,
        default_steps=50,  # configs/sample/hunyuan.py:12
        default_guidance=1.0,  # configs/sample/hunyuan.py:19: guidance is embedded (distilled), no CFG branches
        default_frames=125,  # configs/sample/hunyuan.py:14
        text_encoder=LLAVA_LLAMA3_CLIP,
        vae=HUNYUAN_VAE,
        published_dit_params=13e9,
        published_total_params=13e9,
        published_source="tencent/HunyuanVideo model card and paper (arXiv 2412.03603): 13B parameters",
    ),
}
VIDEO_CATALOG = tuple(VIDEO_MODELS)
_BY_HF_ID = {m.hf_id.lower(): k for k, m in VIDEO_MODELS.items()}


def is_video_model(name: str) -> bool:
    key = (name or "").strip().lower()
    return key in VIDEO_MODELS or key in _BY_HF_ID


@functools.cache
def load_video_model(name: str) -> DiTSpec:
    key = name.strip().lower()
    key = _BY_HF_ID.get(key, key)
    if key not in VIDEO_MODELS:
        raise MiTuneError(f"unknown video model '{name}' (known: {', '.join(VIDEO_CATALOG)})")
    return VIDEO_MODELS[key]


def expert_steps(m: DiTSpec, steps: int) -> tuple[int, ...]:
    """Denoising steps each expert runs. Wan2.2 switches from the high-noise to the low-noise expert when the
    timestep falls below boundary_ratio x 1000 (configs/pipeline_configs/wan.py:283-287); timesteps follow the
    flow-matching schedule sigma' = shift*s / (1 + (shift-1)*s) over s = 1 .. 1/steps (shift: wan.py:282)."""
    if m.experts == 1:
        return (steps,)
    high = 0
    for i in range(steps):
        s = 1.0 - i / steps
        sigma = m.flow_shift * s / (1 + (m.flow_shift - 1) * s)
        high += sigma >= m.boundary_ratio
    return (high, steps - high)


def video_model_rows() -> list[dict]:
    return [
        {
            "name": m.name,
            "family": m.family,
            "total_params_b": round(m.total_params / 1e9, 1),
            "active_params_b": round(m.dit_params / 1e9, 1),
            "kind": "video",
            "hf_id": m.hf_id,
        }
        for m in VIDEO_MODELS.values()
    ]
