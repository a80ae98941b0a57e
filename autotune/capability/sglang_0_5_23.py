"""SGLang 0.5.23: what `python -m sglang.launch_server` accepts, read from the wheel's source (paths relative
to site-packages). Re-check against the installed wheel before changing a rule (`pip download --no-deps
sglang==0.5.23`, unzip, grep the file named in `source`); shared/reference/engine-knobs.md summarises them.
"""

from autotune.capability.rules import Rule, RuleTable

FP4_FORMATS = ["mxfp4", "nvfp4"]

RULES = RuleTable(
    engine="sglang",
    version="0.5.23",
    rules=(
        # ---- the model on the box
        Rule(
            field="pp",
            values=(2, 4, 8),
            when={"family": ["deepseek_v41"]},
            needs={"pp": 1},
            source="sglang/srt/models/deepseek_v4_hook.py:270-351",
            why="the DeepSeek-V4.1 model hook raises on pipeline parallelism",
        ),
        # ---- attention backend: V4.x runs dsv4, GLM-5 DSA runs its own sparse backend
        Rule(
            field="kernels.attention",
            values=("flashinfer", "triton"),
            needs={"attention": ["mha", "mla"]},
            source="sglang/srt/server_args_config/arg_groups/model_override_base.py:277-351",
            why="this model's sparse attention runs only its own backend (dsv4 / dsa)",
        ),
        # ---- MoE runner (--moe-runner-backend)
        Rule(
            field="kernels.moe",
            values=("cutlass",),
            needs={"expert_weights": ["fp8_block"], "cc": [9.0, 10.0, 12.0, 12.1], "ep": 1},
            source="sglang/srt/layers/quantization/fp8.py:1508-1517; "
            "sglang/srt/server_args_config/arg_groups/moe_hook.py:155-163",
            why="the CUTLASS MoE runner needs block-FP8 experts on SM90/100/120 and ep_size == 1",
        ),
        Rule(
            field="kernels.moe",
            values=("marlin",),
            needs={"expert_weights": FP4_FORMATS},
            source="sglang/srt/layers/moe/moe_runner/marlin.py (FP4-expert checkpoints only)",
            why="the Marlin MoE runner exists only for FP4-expert checkpoints",
        ),
        Rule(
            field="kernels.moe",
            values=("flashinfer_mxfp4",),
            needs={"expert_weights": ["mxfp4"]},
            source="sglang/srt/layers/quantization/mxfp4.py",
            why="flashinfer_mxfp4 runs MXFP4 experts only",
        ),
        Rule(
            field="kernels.moe",
            values=("deep_gemm",),
            needs={"expert_weights": ["fp8_block"], "cc": [9.0, 10.0, 12.0, 12.1]},
            source="sglang/srt/layers/moe/moe_runner/deep_gemm.py",
            why="the DeepGEMM MoE runner needs block-FP8 experts (SM90/100, SM120 build)",
        ),
        Rule(
            field="kernels.moe",
            values=("triton",),
            needs={"expert_weights": ["bf16", "fp16", "fp8_block", "fp8_tensor", "fp8_online"]},
            source="sglang/srt/layers/moe/fused_moe_triton/layer.py",
            why="the Triton MoE runner serves bf16 and FP8 experts",
        ),
        Rule(
            field="kernels.moe",
            values=("b12x",),
            needs={"engine": "vllm"},
            source="autotune/engines/flags/sglang-0.5.23.yaml (--moe-runner-backend has no b12x)",
            why="SGLang has no b12x MoE runner",
        ),
        Rule(
            field="kernels.moe",
            values=("flashinfer_cutlass",),
            needs={"cc": {"min": 9.0}},
            source="sglang/srt/layers/moe/moe_runner/flashinfer_cutlass.py",
            why="the FlashInfer CUTLASS MoE runner needs compute capability >= 9.0",
        ),
        # ---- dense FP8 GEMM kernel (--fp8-gemm-backend): applies to FP8 linear layers only
        Rule(
            field="kernels.linear",
            values=("cutlass", "triton"),
            needs={"dense_weights": ["fp8_block", "fp8_tensor", "fp8_online", "mxfp8"]},
            source="sglang/srt/layers/quantization/fp8_utils.py (--fp8-gemm-backend dispatch)",
            why="--fp8-gemm-backend only picks the kernel of FP8 linear layers",
            effect="ignored",
        ),
        Rule(
            field="kernels.linear",
            values=("cutlass",),
            needs={"cc": {"min": 8.9}},
            source="sglang/srt/layers/quantization/fp8_utils.py",
            why="CUTLASS FP8 GEMM needs compute capability >= 8.9",
        ),
        # ---- communication
        Rule(
            field="comm.allreduce",
            values=("pcie_ipc",),
            needs={"allreduce_world": [2, 4, 8], "p2p": True, "nvlink": False, "activation_dtype": "bf16"},
            source="sglang/srt/distributed/device_communicators/pcie_ipc_ar.py",
            why="SGLANG_ENABLE_PCIE_IPC_ALLREDUCE needs a 2/4/8-GPU P2P PCIe TP group and bf16",
            effect="ignored",
        ),
        Rule(
            field="comm.all2all",
            values=("deepep",),
            needs={"nvlink": True, "ep": {"min": 2}},
            source="sglang/srt/server_args_config/overrides.py:1596-1622",
            why="DeepEP needs NVLink between the EP ranks and forces ep = tp",
        ),
        Rule(
            field="overlap.two_batch",
            values=(True,),
            needs={"family": {"not": ["deepseek_v41"]}},
            source="sglang/srt/models/deepseek_v4_hook.py:270-351",
            why="two-batch overlap is forbidden for DeepSeek-V4.1",
        ),
        Rule(
            field="overlap.two_batch",
            values=(True,),
            when={"comm.all2all": "allgather_reducescatter"},
            needs={"dp": {"min": 2}, "family": ["deepseek_v4"], "phase": ["prefill"]},
            source="sglang/srt/batch_overlap/operations_strategy.py:186-233",
            why="without an all-to-all backend the overlap needs DP attention and exists for V4 prefill only",
        ),
        # ---- fusion: FlashInfer all-reduce + RMSNorm is on by default on SM90/SM10x only
        Rule(
            field="fusion.allreduce_rmsnorm",
            values=(True,),
            needs={"cc": [9.0, 10.0, 10.3], "tp": {"min": 2}, "dp": 1, "comm.all2all": "allgather_reducescatter"},
            source="sglang/srt/server_args_config/overrides.py:955-1003",
            why="FlashInfer all-reduce fusion runs on SM90/SM10x with TP > 1, no attention DP and no a2a",
            effect="ignored",
        ),
        # ---- speculative decoding (--speculative-algorithm)
        Rule(
            field="speculative.method",
            values=("mtp",),
            needs={"draft_heads": {"has": "mtp"}, "family": {"not": ["deepseek_v41"]}},
            source="sglang/srt/models/deepseek_v4_hook.py:270-351 (V4.1: DSPARK only); "
            "sglang/srt/speculative/spec_info.py (NEXTN)",
            why="NEXTN (MTP) needs the checkpoint's MTP layers; DeepSeek-V4.1 speculates with DSPARK only",
        ),
        Rule(
            field="speculative.method",
            values=("dspark",),
            needs={"draft_heads": {"has": "dspark"}},
            source="sglang/srt/speculative/spec_info.py (DSPARK)",
            why="DSPARK needs the checkpoint's DSpark head",
        ),
        Rule(
            field="dcp",
            values=(2, 4, 8),
            needs={"dcp_divides_tp": True},
            source="sglang/srt/server_args.py (--dcp-size divides the attention TP size)",
            why="the decode context parallel size must divide the tensor parallel size",
        ),
        Rule(
            field="dcp",
            values=(2, 4, 8),
            needs={"attention": ["mla"]},
            source="sglang/srt/server_args.py (--dcp-size)",
            why="decode context parallelism shards MLA latent KV",
        ),
        # ---- DP-attention side flags
        Rule(
            field="dense_dp",
            values=(True,),
            needs={"dp": {"min": 2}},
            source="sglang/srt/server_args.py (--moe-dense-tp-size 1 with --attn-dp-size)",
            why="a data-parallel dense MLP needs DP attention",
        ),
        Rule(
            field="dp_lm_head",
            values=(True,),
            needs={"dp": {"min": 2}},
            source="sglang/srt/server_args.py (--enable-dp-lm-head needs DP attention)",
            why="the DP LM head needs DP attention",
        ),
        Rule(
            field="eplb",
            values=(True,),
            needs={"ep": {"min": 2}},
            source="sglang/srt/server_args.py (--enable-eplb with expert parallelism)",
            why="EPLB needs expert parallelism",
        ),
    ),
)
