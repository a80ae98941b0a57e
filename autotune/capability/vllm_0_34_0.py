"""vLLM 0.34.0: what `vllm serve` accepts, read from the wheel's source (paths relative to site-packages).

Re-check a rule against the installed wheel before changing it: `pip download --no-deps vllm==0.34.0`, unzip,
grep the file named in `source`. shared/reference/engine-knobs.md summarises the same findings.
"""

from autotune.capability.rules import Rule, RuleTable

FP8_FORMATS = ["fp8_block", "fp8_tensor", "fp8_online", "mxfp8"]
FP4_FORMATS = ["mxfp4", "nvfp4"]
INT4_FORMATS = ["int4_awq", "int4_gptq"]
SPARSE_ATTENTION_FAMILIES = ["deepseek_v4", "deepseek_v41", "glm_moe_dsa"]

RULES = RuleTable(
    engine="vllm",
    version="0.34.0",
    rules=(
        # ---- the model on the box
        Rule(
            field="engine",
            values=("vllm",),
            when={"family": SPARSE_ATTENTION_FAMILIES},
            needs={"cc": {"min": 9.0}},
            source="vllm/model_executor/models/deepseek_v41/nvidia/model.py:210-260",
            why="no sparse-MLA / compressed-attention backend below compute capability 9.0",
        ),
        # ---- attention backend (--attention-backend); an explicit invalid backend raises
        Rule(
            field="kernels.attention",
            values=("flashinfer", "triton"),
            needs={"attention": ["mha", "mla"]},
            source="vllm/model_executor/models/deepseek_v41/nvidia/model.py:210-260",
            why="this model picks its own sparse attention kernel; no generic backend runs it",
        ),
        Rule(
            field="kernels.attention",
            values=("flashinfer",),
            when={"attention": ["mla"]},
            needs={"cc": {"min": 10.0, "max": 10.9}},
            source="vllm/v1/attention/backends/mla/flashinfer_mla.py:221; vllm/platforms/cuda.py:470-490",
            why="FLASHINFER_MLA needs compute capability 10.x",
        ),
        # ---- MoE expert kernel (--moe-backend); an explicit backend that cannot serve the format raises
        Rule(
            field="kernels.moe",
            values=("cutlass",),
            needs={"expert_weights": ["fp8_online"], "cc": {"min": 9.0, "max": 10.9}},
            source="vllm/model_executor/layers/quantization/fp8.py:522-527; vllm/_custom_ops.py:828-830",
            why="CUTLASS MoE is refused for FP8-serialized, bf16 and FP4 experts and needs 9.0 <= cc < 11",
        ),
        Rule(
            field="kernels.moe",
            values=("marlin",),
            needs={"expert_weights": FP8_FORMATS + FP4_FORMATS + INT4_FORMATS},
            source="vllm/model_executor/layers/fused_moe/oracle/unquantized.py:180-195",
            why="Marlin is a quantised-weight kernel; bf16 experts accept triton / flashinfer only",
        ),
        Rule(
            field="kernels.moe",
            values=("deep_gemm",),
            needs={"expert_weights": ["fp8_block", "mxfp4"]},
            source="vllm/model_executor/layers/fused_moe/oracle/unquantized.py:180-195; oracle/mxfp4.py:371-415",
            why="DeepGEMM MoE needs block-FP8 or MXFP4 experts",
        ),
        Rule(
            field="kernels.moe",
            values=("deep_gemm",),
            when={"expert_weights": ["fp8_block"]},
            needs={"cc": [9.0, 10.0]},
            source="vllm/model_executor/layers/fused_moe/oracle/fp8.py (DeepGEMM FP8: SM90/SM100)",
            why="DeepGEMM FP8 MoE needs SM90 or SM100",
        ),
        Rule(
            field="kernels.moe",
            values=("deep_gemm",),
            when={"expert_weights": ["mxfp4"]},
            needs={"cc": [10.0, 12.0, 12.1]},
            source="vllm/model_executor/layers/fused_moe/oracle/mxfp4.py:371-415",
            why="DeepGEMM MXFP4 MoE needs SM100 or SM120",
        ),
        Rule(
            field="kernels.moe",
            values=("b12x",),
            needs={"expert_weights": FP4_FORMATS, "cc": [12.0, 12.1]},
            source="vllm/model_executor/layers/fused_moe/oracle/mxfp4.py:371-415",
            why="b12x (W4A8) runs FP4 experts on SM120/121 only",
        ),
        Rule(
            field="kernels.moe",
            values=("flashinfer_cutlass",),
            needs={"cc": {"min": 9.0}},
            source="vllm/model_executor/layers/fused_moe/oracle/unquantized.py:180-195; oracle/mxfp4.py:371-415",
            why="FlashInfer CUTLASS MoE needs compute capability >= 9.0",
        ),
        Rule(
            field="kernels.moe",
            values=("flashinfer_mxfp4",),
            needs={"engine": "sglang"},
            source="autotune/engines/flags/vllm-0.34.0.yaml (--moe-backend has no flashinfer_mxfp4)",
            why="vLLM has no runner of that name (its FlashInfer MXFP4 path is flashinfer_cutlass)",
        ),
        # ---- dense GEMM kernel (--linear-backend): a kernel missing for the layer type silently falls back to
        # auto (kernels/linear/__init__.py:392-440), which the model would still credit
        Rule(
            field="kernels.linear",
            values=("cutlass",),
            needs={"dense_weights": FP8_FORMATS, "cc": {"min": 8.9}},
            source="vllm/model_executor/kernels/linear/__init__.py:392-440",
            why="the CUTLASS linear kernel serves FP8 weights on cc >= 8.9",
            effect="ignored",
        ),
        Rule(
            field="kernels.linear",
            values=("b12x",),
            needs={"dense_weights": FP4_FORMATS + ["mxfp8"], "cc": [12.0, 12.1]},
            source="vllm/model_executor/kernels/linear/__init__.py:392-440",
            why="b12x linear runs FP4/MXFP8 weights on SM120/121 only",
            effect="ignored",
        ),
        # ---- communication
        Rule(
            field="comm.allreduce",
            values=("pcie_ipc",),
            needs={"allreduce_world": [2, 4, 8], "p2p": True, "nvlink": False, "overlap.two_batch": False},
            source="vllm/distributed/device_communicators/flashinfer_pcie_ipc_all_reduce.py; "
            "cuda_communicator.py:56-82",
            why="PCIe-IPC all-reduce needs a 2/4/8-GPU P2P PCIe TP group and is off under DBO",
            effect="ignored",
        ),
        Rule(
            field="comm.all2all",
            values=("deepep",),
            needs={"nvlink": True, "dp": {"min": 2}, "ep": {"min": 2}},
            source="vllm/config/parallel.py:859-885",
            why="the all-to-all backend is used only with dp > 1 and expert parallelism; DeepEP needs NVLink",
            effect="ignored",
        ),
        Rule(
            field="overlap.two_batch",
            values=(True,),
            needs={"comm.all2all": "deepep", "family": {"not": ["deepseek_v41"]}},
            source="vllm/config/vllm.py:2090-2108; vllm/config/vllm.py:1412-1421",
            why="--enable-dbo needs a DeepEP all2all backend and is rejected for DeepSeek-V4.1 (Engram)",
        ),
        # ---- fusion (-cc pass_config)
        Rule(
            field="fusion.allreduce_rmsnorm",
            values=(True,),
            needs={"cc": [9.0, 10.0, 10.3], "tp": {"min": 2}},
            source="vllm/compilation/passes/fusion/allreduce_rms_fusion.py:104-127",
            why="fuse_allreduce_rms has FlashInfer sizes only for cc 9.0/10.x and needs TP > 1",
        ),
        # ---- speculative decoding (--speculative-config)
        Rule(
            field="speculative.method",
            values=("mtp",),
            needs={"draft_heads": {"has": "mtp"}, "family": {"not": ["deepseek_v41"]}},
            source="vllm/config/speculative.py (method mtp needs num_nextn_predict_layers); "
            "vllm/model_executor/models/deepseek_v41 registers dspark only",
            why="MTP needs the checkpoint's MTP layers; DeepSeek-V4.1 speculates with DSpark only",
        ),
        Rule(
            field="speculative.method",
            values=("dspark",),
            needs={"draft_heads": {"has": "dspark"}},
            source="vllm/config/speculative.py (dspark reads dspark_target_layer_ids)",
            why="DSpark needs the checkpoint's DSpark head",
        ),
        # ---- decode context parallelism (-dcp)
        Rule(
            field="dcp",
            values=(2, 4, 8),
            needs={"attention": ["mla"], "kernels.attention": ["auto", "triton"]},
            source="vllm/config/parallel.py (tp % dcp == 0); vllm/v1/attention/backends/mla/triton_mla.py",
            why="decode context parallelism runs on MLA backends that support it (TRITON_MLA)",
        ),
        Rule(
            field="dcp",
            values=(2, 4, 8),
            needs={"dcp_divides_tp": True},
            source="vllm/config/parallel.py (tensor_parallel_size % decode_context_parallel_size == 0)",
            why="the decode context parallel size must divide the tensor parallel size",
        ),
        Rule(
            field="eplb",
            values=(True,),
            needs={"ep": {"min": 2}},
            source="vllm/config/parallel.py (enable_eplb requires enable_expert_parallel)",
            why="EPLB needs expert parallelism",
        ),
        # ---- SGLang-only plan fields
        Rule(
            field="dense_dp",
            values=(True,),
            needs={"engine": "sglang"},
            source="autotune/engines/flags/vllm-0.34.0.yaml (no --moe-dense-tp-size)",
            why="vLLM has no data-parallel dense MLP option",
        ),
        Rule(
            field="dp_lm_head",
            values=(True,),
            needs={"engine": "sglang"},
            source="autotune/engines/flags/vllm-0.34.0.yaml (no --enable-dp-lm-head)",
            why="vLLM has no DP LM head option",
        ),
    ),
)
