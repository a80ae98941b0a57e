"""vLLM 0.34.0: what `vllm serve` accepts, read from the wheel's source (paths relative to site-packages).

Re-check a rule against the installed wheel before changing it: `pip download --no-deps vllm==0.34.0`, unzip,
grep the file named in `source`. shared/reference/engine-knobs.md summarises the same findings.
"""

from autotune.capability.rules import Rule, RuleTable

# per-tensor FP8 by activation scheme: fp8_tensor static scales, fp8_tensor_dynamic dynamic (catalog/adapters/common.py)
FP8_CHECKPOINT = ["fp8_block", "fp8_tensor", "fp8_tensor_dynamic", "mxfp8"]
FP8_FORMATS = FP8_CHECKPOINT + ["fp8_online"]
FP4_FORMATS = ["mxfp4", "nvfp4"]
INT4_FORMATS = ["int4_awq", "int4_gptq"]
# Hybrid linear-attention models: prefix caching is on by default (config/cache.py:267) and puts the linear layers in
# mamba_cache_mode "align" (model_executor/models/config.py:1094-1110): a request holds 2 state blocks plus one per
# speculative token (v1/kv_cache_interface.py:1168-1174). perf/linear_attention.py uses it.
MAMBA_STATES_PER_REQUEST = 2
HYBRID_FAMILIES = ["qwen3_5_moe", "qwen3_5_moe_text", "glm5_next"]
SPARSE_ATTENTION_FAMILIES = ["deepseek_v4", "deepseek_v41", "glm_moe_dsa"]
# run with torch.compile off by default (DEFAULT_BREAKABLE_CUDAGRAPH_ARCHITECTURES), so no pass_config applies
UNCOMPILED_FAMILIES = ["glm_moe_dsa", "deepseek_v32", "deepseek_v4", "deepseek_v41"]

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
            source="vllm/platforms/cuda.py:512-516 (GLM-5: no valid sparse backend below cc 9); "
            "vllm/v1/attention/ops/flashmla.py:65-77 (V4.x FlashMLA sparse: Hopper/Blackwell only)",
            why="no sparse-MLA / compressed-attention kernel below compute capability 9.0 "
            "(GLM-5 raises at start-up, V4.x fails when the first batch runs)",
        ),
        # ---- attention backend (--attention-backend); an explicit backend that fails validation raises
        Rule(
            field="kernels.attention",
            values=("flashinfer", "triton"),
            needs={"attention": ["mha", "mla"]},
            source="vllm/v1/attention/backend.py:324-328 (GLM-5 non-sparse backend raises); "
            "vllm/models/deepseek_v41/nvidia/model.py:203-266 (V4.x chooses its own)",
            why="this model runs only its own sparse attention backend",
        ),
        Rule(
            field="kernels.attention",
            values=("flashinfer",),
            when={"attention": ["mla"]},
            needs={"cc": {"min": 10.0, "max": 10.9}},
            source="vllm/v1/attention/backends/mla/flashinfer_mla.py:220-221; vllm/platforms/cuda.py:470-490",
            why="FLASHINFER_MLA needs compute capability 10.x",
        ),
        # ---- MoE expert kernel (--moe-backend); an explicit backend the kernel class refuses raises
        # (fused_moe/oracle/base.py:215-236)
        Rule(
            field="kernels.moe",
            values=("cutlass",),
            needs={"expert_weights": ["fp8_channel_online"]},
            source="vllm/model_executor/layers/quantization/fp8.py:522-527; "
            "vllm/model_executor/layers/quantization/online/fp8.py:531-574,826-848",
            why="vLLM's CUTLASS MoE serves only online per-channel FP8 (--quantization fp8_per_channel, which "
            "mi-tune does not emit): checkpoint FP8, per-tensor FP8, bf16 and FP4 experts raise",
        ),
        Rule(
            field="kernels.moe",
            values=("marlin",),
            needs={"expert_weights": FP8_FORMATS + FP4_FORMATS + INT4_FORMATS},
            source="vllm/model_executor/layers/fused_moe/oracle/unquantized.py:180-195",
            why="Marlin is a quantised-weight kernel; for bf16 experts it silently falls back to auto",
            effect="ignored",
        ),
        Rule(
            field="kernels.moe",
            values=("triton",),
            when={"expert_weights": FP8_FORMATS},
            needs={"cc": {"min": 8.9}},
            source="vllm/model_executor/layers/fused_moe/experts/triton_moe.py:197; vllm/platforms/cuda.py:628-629; "
            "vllm/model_executor/layers/fused_moe/oracle/fp8.py:458",
            why="the Triton fused MoE takes FP8 experts only where the platform supports FP8 (cc >= 8.9): an explicit "
            "Triton backend raises on an A100 / A800 (the auto pick there is Marlin, W8A16)",
        ),
        Rule(
            field="kernels.moe",
            values=("deep_gemm",),
            needs={"expert_weights": ["fp8_block", "mxfp4"], "cc": [9.0, 10.0, 10.3, 12.0, 12.1]},
            source="vllm/model_executor/layers/fused_moe/experts/deep_gemm_moe.py:176-185,474-481; "
            "vllm/platforms/cuda.py:732-738; vllm/utils/deep_gemm.py:151-175",
            why="DeepGEMM MoE needs block-FP8 (cc 9.0 / 10.x / 12.x) or MXFP4 experts and the deep_gemm package",
        ),
        Rule(
            field="kernels.moe",
            values=("deep_gemm",),
            when={"expert_weights": ["mxfp4"]},
            needs={"cc": [10.0, 10.3, 12.0, 12.1]},
            source="vllm/model_executor/layers/fused_moe/experts/deep_gemm_moe.py:474-481",
            why="DeepGEMM MXFP4 MoE needs the SM100 or SM120 family",
        ),
        Rule(
            field="kernels.moe",
            values=("b12x",),
            needs={"expert_weights": FP4_FORMATS, "cc": [12.0, 12.1]},
            source="vllm/model_executor/layers/fused_moe/b12x.py:498-507; "
            "vllm/model_executor/layers/fused_moe/oracle/mxfp4.py:371-419",
            why="b12x (W4A8) runs FP4 experts on the SM120 family only (and needs the b12x library)",
        ),
        Rule(
            field="kernels.moe",
            values=("b12x",),
            needs={"ep": 1, "eplb": False},
            source="vllm/model_executor/layers/fused_moe/b12x.py:536-545 (_supports_parallel_config); "
            "vllm/model_executor/layers/fused_moe/oracle/base.py:218-237 (an explicit backend no kernel takes raises)",
            why="b12x refuses expert parallelism, all-to-all kernels and EPLB",
        ),
        Rule(
            field="kernels.moe",
            values=("flashinfer_cutlass",),
            needs={
                "expert_weights": ["bf16", "fp16", "fp8_block", "fp8_tensor", "mxfp4", "nvfp4"],
                "cc": [9.0, 10.0, 10.3, 12.0, 12.1],
            },
            source="vllm/model_executor/layers/fused_moe/experts/flashinfer_cutlass_moe.py:135-187",
            why="FlashInfer CUTLASS MoE runs on cc 9.0 / 10.x / 12.x; of per-tensor FP8 it takes static activation "
            "scales only (ModelOpt FP8), not dynamic ones (online FP8, activation_scheme dynamic)",
        ),
        Rule(
            field="kernels.moe",
            values=("flashinfer_cutlass",),
            when={"expert_weights": ["fp8_block"]},
            needs={"cc": [9.0]},
            source="vllm/model_executor/layers/fused_moe/experts/flashinfer_cutlass_moe.py:170-178",
            why="FlashInfer CUTLASS block-FP8 MoE needs cc 9.0",
        ),
        Rule(
            field="kernels.moe",
            values=("flashinfer_mxfp4",),
            needs={"engine": "sglang"},
            source="autotune/engines/flags/vllm-0.34.0.yaml (--moe-backend has no flashinfer_mxfp4)",
            why="vLLM has no runner of that name (its FlashInfer MXFP4 path is flashinfer_cutlass)",
        ),
        # ---- dense GEMM kernel (--linear-backend): a backend with no kernel for the layer type silently falls back
        # to auto (kernels/linear/__init__.py:495-507), which the model would still credit
        Rule(
            field="kernels.linear",
            values=("cutlass",),
            needs={"dense_weights": ["fp8_block", "fp8_tensor", "fp8_tensor_dynamic", "fp8_online"]},
            source="vllm/model_executor/kernels/linear/__init__.py:296-302,394-407,418-442",
            why="--linear-backend cutlass has FP8 kernels for per-tensor and 128-block FP8 only (no MXFP8, and "
            "mi-tune's linear_kernel is the FP8 GEMM kernel): other layers run what vLLM picks itself",
            effect="ignored",
        ),
        Rule(
            field="kernels.linear",
            values=("triton",),
            needs={"dense_weights": ["fp8_block"]},
            source="vllm/model_executor/kernels/linear/__init__.py:341-345,394-407,418-442",
            why="--linear-backend triton has a block-FP8 kernel only (TritonFp8BlockScaledMMKernel): per-tensor, "
            "online and MXFP8 layers run what vLLM picks itself",
            effect="ignored",
        ),
        Rule(
            field="kernels.linear",
            values=("cutlass",),
            needs={"cc": {"min": 8.9}},
            source="vllm/model_executor/kernels/linear/scaled_mm/cutlass.py:274-284",
            why="CUTLASS FP8 GEMM needs compute capability >= 8.9",
        ),
        # ---- communication
        Rule(
            field="comm.allreduce",
            values=("pcie_ipc",),
            needs={"allreduce_world": [2, 4, 8], "p2p": True, "nvlink": False, "overlap.two_batch": False},
            source="vllm/distributed/device_communicators/cuda_communicator.py:56-82; "
            "vllm/distributed/device_communicators/flashinfer_pcie_ipc_all_reduce.py:126; vllm/envs.py:2073-2078",
            why="PCIe-IPC all-reduce needs a 2/4/8-GPU TP group with P2P on PCIe and is off under DBO",
            effect="ignored",
        ),
        Rule(
            field="comm.all2all",
            values=("deepep",),
            needs={"nvlink": True, "dp": {"min": 2}, "ep": {"min": 2}},
            source="vllm/config/parallel.py:880-885; vllm/distributed/device_communicators/all2all.py:205-212",
            why="the all-to-all backend runs only with expert parallelism and dp > 1; DeepEP needs NVLink",
            effect="ignored",
        ),
        Rule(
            field="overlap.two_batch",
            values=(True,),
            needs={"comm.all2all": "deepep", "pp": 1, "family": {"not": ["deepseek_v41"]}},
            source="vllm/config/vllm.py:2090-2115 (a2a backend); :3378-3408 (PP); :1412-1421 and "
            "vllm/model_executor/models/registry.py:359,393-396 (V4.1: Engram, multimodal)",
            why="--enable-dbo needs a DeepEP all2all backend and no pipeline parallelism; DeepSeek-V4.1 refuses it",
        ),
        # ---- fusion (-cc pass_config)
        Rule(
            field="fusion.allreduce_rmsnorm",
            values=(True,),
            needs={"cc": [9.0, 10.0, 10.3], "tp": {"min": 2}, "family": {"not": UNCOMPILED_FAMILIES}},
            source="vllm/compilation/passes/fusion/allreduce_rms_fusion.py:104-127,984-1056; "
            "vllm/config/vllm.py:99-128",
            why="fuse_allreduce_rms has FlashInfer sizes only for cc 9.0/10.x, needs TP > 1, and this model runs "
            "without torch.compile",
            effect="ignored",
        ),
        # ---- speculative decoding (--speculative-config)
        Rule(
            field="speculative.method",
            values=("mtp",),
            needs={"draft_heads": {"has": "mtp"}, "family": {"not": ["deepseek_v41"]}},
            source="vllm/v1/worker/gpu/spec_decode/mtp/config.py:80-98; "
            "vllm/v1/worker/gpu/spec_decode/speculator_config.py:275-291",
            why="MTP needs the checkpoint's MTP layers; DeepSeek-V4.1 speculates with DSpark only",
        ),
        Rule(
            field="speculative.method",
            values=("dspark",),
            needs={"draft_heads": {"has": "dspark"}},
            source="vllm/v1/worker/gpu/spec_decode/dspark/config.py:55-92",
            why="DSpark needs the checkpoint's DSpark head",
        ),
        # ---- decode context parallelism (-dcp)
        Rule(
            field="dcp",
            values=(2, 4, 8),
            needs={"dcp_divides_tp": True},
            source="vllm/config/parallel.py:638-641",
            why="the decode context parallel size must divide the tensor parallel size",
        ),
        # MLA: every backend mi-tune names supports DCP (TRITON_MLA mla/triton_mla.py:170, FLASHINFER_MLA
        # mla/flashinfer_mla.py:255; the latter's cc 10.x need is its own rule), so only GQA has a DCP rule here
        Rule(
            field="dcp",
            values=(2, 4, 8),
            when={"attention": ["mha"]},
            needs={"dcp_fits_kv_heads": True, "kernels.attention": ["auto", "flashinfer"]},
            source="vllm/config/model.py:1598-1628 (GQA: tp > KV heads, dcp <= tp / KV heads, divides q per KV); "
            "vllm/v1/attention/backends/flash_attn.py:1068; vllm/v1/attention/backends/flashinfer.py:2043 "
            "(TRITON_ATTN has no DCP)",
            why="GQA decode context parallelism needs tp > KV heads, dcp <= tp / KV heads dividing the query heads "
            "per KV head, and FLASH_ATTN or FLASHINFER",
        ),
        Rule(
            field="eplb",
            values=(True,),
            needs={"ep": {"min": 2}, "expert_weights": ["bf16", "fp16"] + FP8_FORMATS + FP4_FORMATS},
            source="vllm/config/parallel.py:601-608; vllm/model_executor/layers/fused_moe/fused_moe_method_base.py:"
            "128-130; vllm/model_executor/layers/fused_moe/unquantized_fused_moe_method.py:64-66; "
            "vllm/model_executor/layers/quantization/fp8.py:801-803",
            why="EPLB needs expert parallelism and a MoE method that supports it (bf16, FP8, FP4 experts; not INT4)",
        ),
        # ---- disaggregated: NIXL hashes what the KV transfer depends on and refuses a peer whose hash differs
        # (nixl/base_worker.py:1267-1283, enforce_handshake_compat defaults to true :1112-1114); every request fails
        Rule(
            field="kernels.kv_cache_dtype",
            values=(),
            when={"mode": "disaggregated"},
            needs={"kernels.kv_cache_dtype": {"same_as": "peer.kernels.kv_cache_dtype"}},
            source="vllm/distributed/kv_transfer/kv_connector/v1/nixl/metadata.py:150-220 (cache_dtype); "
            "vllm/distributed/kv_transfer/kv_connector/v1/nixl/base_worker.py:1112-1114,1267-1283",
            why="prefill and decode must use the same KV-cache dtype (NIXL compatibility hash)",
        ),
        Rule(
            field="kernels.attention",
            values=(),
            when={"mode": "disaggregated"},
            needs={"kernels.attention": {"same_as": "peer.kernels.attention"}},
            source="vllm/distributed/kv_transfer/kv_connector/v1/nixl/metadata.py:150-220 (attn_backend_name); "
            "vllm/distributed/kv_transfer/kv_connector/v1/nixl/base_worker.py:1267-1283",
            why="prefill and decode must run the same attention backend (NIXL compatibility hash)",
        ),
        Rule(
            field="speculative.method",
            values=(),
            when={"mode": "disaggregated"},
            needs={"speculative.method": {"same_as": "peer.speculative.method"}},
            source="vllm/distributed/kv_transfer/kv_connector/v1/nixl/metadata.py:107-145,150-220 "
            "(speculative_config of MTP / DSpark: uses_target_hidden_states); "
            "vllm/v1/worker/gpu/spec_decode/eagle/config.py:38; vllm/v1/worker/gpu/spec_decode/dflash/config.py:19",
            why="prefill and decode must speculate alike (NIXL compatibility hash covers MTP / DSpark drafts)",
        ),
        # ---- batching
        Rule(
            field="batching.chunked_prefill_tokens",
            values=(),
            needs={"chunk_covers_running": True},
            source="vllm/config/scheduler.py:361-405",
            why="max_num_batched_tokens must be >= max_num_seqs",
        ),
        Rule(
            field="batching.cuda_graph_max_bs",
            values=(),
            needs={"graph_bs_within_running": True},
            source="vllm/config/vllm.py:2655-2659 (the decode grid runs to min(max_decode_cudagraph_capture_requests, "
            "max_num_seqs))",
            why="decode CUDA graphs are captured up to max_num_seqs at most",
            effect="ignored",
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
        # ---- hybrid linear-attention families (Qwen3.5 MoE: Gated DeltaNet; GLM-5.3-Flash: KDA + MLA/DSA)
        Rule(
            field="engine",
            values=("vllm",),
            when={"family": ["glm5_next"]},
            needs={"cc": {"min": 9.0}},
            source="vllm/models/glm5next/nvidia/sparse_indexer.py:790-793 (the k-pool sparse indexer needs DeepGEMM); "
            "vllm/platforms/cuda.py:512-516 (no sparse-MLA backend below cc 9)",
            why="GLM-5.3-Flash's MLA layers run DSA sparse attention, which has no kernel below compute capability 9.0",
        ),
        Rule(
            field="pp",
            values=(2, 4, 8),
            when={"family": ["glm5_next"]},
            needs={"pp": 1},
            source="vllm/models/glm5next/common/model.py:1267-1273 (Glm5NextForConditionalGeneration does not "
            "implement SupportsPP); vllm/config/model.py:1590-1596",
            why="pipeline parallelism is not supported for GLM-5.3-Flash's multimodal architecture",
        ),
        Rule(
            field="fusion.allreduce_rmsnorm",
            values=(True,),
            needs={"family": {"not": HYBRID_FAMILIES}},
            source="vllm/config/vllm.py:88-158 (Glm5Next* in DEFAULT_BREAKABLE_CUDAGRAPH_ARCHITECTURES; Qwen3.5 "
            "architectures join it on CUDA)",
            why="this hybrid model runs breakable CUDA graphs without torch.compile, so no compile fusion pass applies",
            effect="ignored",
        ),
    ),
)
