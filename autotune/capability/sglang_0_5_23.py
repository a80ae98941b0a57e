"""SGLang 0.5.23: what `python -m sglang.launch_server` accepts, read from the wheel's source (paths relative
to site-packages; `srt/` = sglang/srt/, `arg_groups/` = sglang/srt/arg_groups/). Re-check against the installed
wheel before changing a rule (`pip download --no-deps sglang==0.5.23`, unzip, grep the file named in `source`);
shared/reference/engine-knobs.md summarises them.
"""

from autotune.capability.rules import Rule, RuleTable

FP4_FORMATS = ["mxfp4", "nvfp4"]
SPARSE_ATTENTION_FAMILIES = ["deepseek_v4", "deepseek_v41", "glm_moe_dsa"]
# batch_overlap/operations_strategy.py:33-78: decoder layers with a two-batch-overlap operation strategy
# Hybrid linear-attention models: the radix cache keeps this many state slots per running request
# (MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO, srt/mem_cache/kv_cache_configurator.py:227, 3062-3090); the engine
# caps running requests at --max-mamba-cache-size // 3 (:3137-3160). perf/linear_attention.py and the emitter use it.
MAMBA_SLOTS_PER_RUNNING_REQUEST = 3
TBO_FAMILIES = ["deepseek_v3", "glm_moe_dsa", "qwen3_moe", "deepseek_v4"]
# model_types whose SGLang architecture is in _FLASHINFER_ALLREDUCE_FUSION_ARCHS (arg_groups/overrides.py:928-951):
# DeepseekV3/V32/V4, GlmMoeDsa, Qwen3Moe, Qwen3_5Moe (the multimodal class); V4.1 runs as DeepseekV4ForCausalLM
# (srt/configs/deepseek_v41.py:38-39). Not Llama, dense Qwen3, the text-only Qwen3.5 class nor GLM-5.3-Flash.
AR_FUSION_FAMILIES = [
    "deepseek_v3",
    "deepseek_v32",
    "deepseek_v4",
    "deepseek_v41",
    "glm_moe_dsa",
    "qwen3_moe",
    "qwen3_5_moe",
]

RULES = RuleTable(
    engine="sglang",
    version="0.5.23",
    rules=(
        # ---- the model on the box
        Rule(
            field="engine",
            values=("sglang",),
            when={"family": SPARSE_ATTENTION_FAMILIES},
            needs={"cc": {"min": 9.0}},
            source="arg_groups/deepseek_v4_hook.py:45-60 (dsv4 -> FlashMLA, sm90/sm100/sm120 kernels); "
            "arg_groups/overrides.py:601-746 (GLM-5 DSA sub-backends: flashmla / trtllm / fa3, cc >= 9)",
            why="no sparse-MLA / compressed-attention kernel below compute capability 9.0 (fails when the first "
            "batch runs)",
        ),
        # V4.1's candidate indexer (candidate_topk_blocks > 0 in its config) takes DeepGEMM's paged sparse MQA
        # logits on any major >= 10, but that kernel is enabled only on SM100 (major 10): sm_110 / sm_120 raise.
        Rule(
            field="engine",
            values=("sglang",),
            when={"family": ["deepseek_v41"]},
            needs={"cc": {"max": 10.9}},
            source="srt/layers/attention/attention_registry.py:194-203 (CUDA dsv4: DeepseekV4AttnBackend or a "
            "subclass); srt/layers/attention/deepseek_v4_backend.py:1284-1291 (make_candidate_indexer with "
            "candidate_topk_blocks); srt/layers/attention/dsv4/v41_indexer/__init__.py:43-46,99-110 (major >= 10 "
            "needs DEEPGEMM_PAGED_SPARSE_MQA_LOGITS or RuntimeError); "
            "srt/layers/deep_gemm_wrapper/configurer.py:57,64-78 "
            "(only with DEEPGEMM_BLACKWELL = is_sm100); srt/runtime_context.py:1832; srt/utils/common.py:309-313",
            why="DeepSeek-V4.1's candidate indexer needs DeepGEMM's paged sparse MQA logits, built only for SM100 "
            "(RuntimeError at start-up on compute capability 11 / 12)",
        ),
        Rule(
            field="pp",
            values=(2, 4, 8),
            when={"family": ["deepseek_v41"]},
            needs={"pp": 1},
            source="arg_groups/deepseek_v4_hook.py:346-352",
            why="DeepSeek-V4.1 does not support pipeline parallelism (ValueError)",
        ),
        # ---- attention backend: V4.x always runs dsv4 (an explicit one is silently replaced), GLM-5 runs dsa
        Rule(
            field="kernels.attention",
            values=("flashinfer", "triton"),
            needs={"attention": ["mha", "mla"]},
            source="arg_groups/model_overrides/deepseek_v4.py:18-64; arg_groups/model_overrides/deepseek_v2.py:98-104",
            why="this model's sparse attention runs only its own backend (dsv4 / dsa)",
            effect="ignored",
        ),
        # ---- MoE runner (--moe-runner-backend)
        Rule(
            field="kernels.moe",
            values=("cutlass",),
            needs={"expert_weights": ["fp8_block"], "cc": [9.0, 10.0, 12.0, 12.1], "ep": 1},
            source="srt/layers/quantization/fp8.py:1508-1517; arg_groups/moe_hook.py:155-163",
            why="the CUTLASS MoE runner asserts block-FP8 experts on SM90/100/120 and ep_size == 1",
        ),
        Rule(
            field="kernels.moe",
            values=("marlin",),
            needs={"expert_weights": FP4_FORMATS},
            source="srt/layers/quantization/fp8.py:445-450; srt/layers/quantization/unquant.py:1169-1194",
            why="the Marlin MoE runner exists only for FP4-expert checkpoints (bf16 silently runs Triton)",
            effect="ignored",
        ),
        Rule(
            field="kernels.moe",
            values=("flashinfer_mxfp4",),
            needs={"expert_weights": ["mxfp4"], "cc": [9.0, 10.0, 12.0, 12.1]},
            source="srt/layers/quantization/fp8.py:459-470; arg_groups/model_overrides/deepseek_v4.py:66-89",
            why="flashinfer_mxfp4 runs MXFP4 experts on SM90/100/120",
        ),
        Rule(
            field="kernels.moe",
            values=("deep_gemm",),
            needs={"expert_weights": ["fp8_block"], "cc": [9.0, 10.0, 12.0, 12.1]},
            source="srt/layers/deep_gemm_wrapper/configurer.py:32-52; srt/layers/quantization/fp8.py:1528-1529",
            why="the DeepGEMM MoE runner needs block-FP8 experts and sm >= 90 (SM120 build)",
        ),
        Rule(
            field="kernels.moe",
            values=("triton",),
            needs={"expert_weights": ["bf16", "fp16", "fp8_block", "fp8_tensor", "fp8_tensor_dynamic", "fp8_online"]},
            source="srt/layers/quantization/unquant.py:1169-1194; srt/layers/quantization/fp8.py:2960-2983",
            why="the Triton MoE runner serves bf16 and FP8 experts",
        ),
        Rule(
            field="kernels.moe",
            values=("flashinfer_cutlass",),
            # ModelOpt FP8 (modelopt_fp8) would pass (modelopt_quant.py:1343-1356 runs it), but fp8_tensor also
            # names `fp8` checkpoints with static scales, which the assert refuses: left out
            needs={"expert_weights": ["bf16", "fp16", "nvfp4"], "cc": {"min": 9.0}},
            source="arg_groups/moe_hook.py:80-93",
            why="flashinfer_cutlass asserts an unquantised or ModelOpt checkpoint (FP8 experts silently run Triton)",
        ),
        Rule(
            field="kernels.moe",
            values=("b12x",),
            needs={"engine": "vllm"},
            source="autotune/engines/flags/sglang-0.5.23.yaml (--moe-runner-backend has no b12x)",
            why="SGLang has no b12x MoE runner",
        ),
        # ---- dense FP8 GEMM kernel (--fp8-gemm-backend): applies to FP8 linear layers only
        Rule(
            field="kernels.linear",
            values=("triton",),
            needs={"dense_weights": ["fp8_block", "mxfp8"]},
            source="srt/layers/quantization/fp8.py:1436-1475 (per-tensor and online FP8: apply_fp8_linear never "
            "reads the backend); srt/layers/quantization/fp8_utils.py:704-734 (block FP8 dispatch)",
            why="--fp8-gemm-backend is read for block-FP8 linear layers only (per-tensor and online FP8 run "
            "apply_fp8_linear)",
            effect="ignored",
        ),
        Rule(
            field="kernels.linear",
            values=("cutlass",),
            needs={"dense_weights": ["fp8_block"]},
            source="srt/layers/quantization/fp8.py:1436-1475 (per-tensor and online FP8 never read the backend); "
            "srt/layers/quantization/fp8_utils.py:713-734 (32x32-block FP8 runs DeepGEMM or Triton whatever it says)",
            why="--fp8-gemm-backend cutlass is read for 128-block FP8 linear layers only (online / per-tensor FP8 "
            "run apply_fp8_linear, 32-block FP8 runs Triton)",
            effect="ignored",
        ),
        Rule(
            field="kernels.linear",
            values=("cutlass",),
            when={"dense_weights": ["fp8_block"]},
            needs={"cc": [12.0, 12.1]},
            source="srt/layers/quantization/fp8_utils.py:1137-1143 (_dispatch_explicit_backend)",
            why="--fp8-gemm-backend cutlass raises off SM120 ('deprecated on this hardware')",
        ),
        # ---- communication
        Rule(
            field="comm.allreduce",
            values=("pcie_ipc",),
            needs={"allreduce_world": [4, 8], "p2p": True, "nvlink": False, "activation_dtype": "bf16"},
            source="srt/distributed/device_communicators/pcie_ipc_ar.py:75,209-215,389-405; "
            "srt/distributed/parallel_state.py:951-990",
            why="SGLANG_ENABLE_PCIE_IPC_ALLREDUCE needs a 4/8-GPU P2P PCIe TP group (at 2 the custom all-reduce "
            "runs first) and bf16",
            effect="ignored",
        ),
        Rule(
            field="comm.all2all",
            values=("deepep",),
            needs={"nvlink": True, "ep": {"min": 2}},
            source="arg_groups/overrides.py:1578-1620",
            why="DeepEP forces ep = tp and needs NVLink between the EP ranks",
        ),
        Rule(
            field="overlap.two_batch",
            values=(True,),
            needs={"family": TBO_FAMILIES},
            source="srt/batch_overlap/operations_strategy.py:33-78; arg_groups/deepseek_v4_hook.py:345-352",
            why="two-batch overlap has an operation strategy only for DeepSeek-V3/V4, GLM-5 and Qwen3-MoE layers "
            "(and V4.1 refuses it)",
        ),
        Rule(
            field="overlap.two_batch",
            values=(True,),
            when={"family": ["deepseek_v4"]},
            needs={"phase": ["prefill"]},
            source="srt/batch_overlap/operations_strategy.py:170-183",
            why="DeepSeek-V4 two-batch overlap runs prefill (EXTEND) batches only",
        ),
        Rule(
            field="overlap.two_batch",
            values=(True,),
            when={"comm.all2all": "allgather_reducescatter"},
            needs={"dp": {"min": 2}},
            source="arg_groups/validation_hook.py:756-771 (check_two_batch_overlap)",
            why="without an all-to-all backend two-batch overlap needs DP attention",
        ),
        Rule(
            field="overlap.two_batch",
            values=(True,),
            when={"family": {"not": ["deepseek_v4"]}},
            needs={"comm.all2all": "deepep"},
            source="srt/batch_overlap/operations_strategy.py:86-160 (DeepSeek / Qwen3-MoE operation lists); "
            "srt/models/deepseek_v2.py:1959-1979 (dispatch_output is set only when ep_size > 1); "
            "srt/models/qwen3_moe.py:446-458; srt/batch_overlap/operations_strategy.py:186-203 (the no-a2a path: "
            "DeepSeek-V4 prefill only)",
            why="two-batch overlap needs an all-to-all dispatcher (DeepEP) except on DeepSeek-V4 prefill: the "
            "overlapped MoE reads a dispatch output only expert parallelism produces (fails on the first batch)",
        ),
        # ---- fusion: FlashInfer all-reduce + RMSNorm is on by default on SM90/SM10x only
        Rule(
            field="fusion.allreduce_rmsnorm",
            values=(True,),
            needs={
                "cc": [9.0, 10.0, 10.3],
                "tp": {"min": 2},
                "dp": 1,
                "comm.all2all": "allgather_reducescatter",
                "family": AR_FUSION_FAMILIES,
            },
            source="arg_groups/overrides.py:928-951,955-1003",
            why="FlashInfer all-reduce fusion runs on SM90/SM10x with TP > 1, no attention DP and no a2a, for the "
            "architectures SGLang lists",
            effect="ignored",
        ),
        Rule(
            field="fusion.allreduce_rmsnorm",
            values=(True,),
            when={
                "family": ["deepseek_v41"],
                "hidden_size": [5120],
                "tp": [4],
                "dp": 1,
                "comm.allreduce": {"not": ["nccl"]},  # --disable-custom-all-reduce (engines/sglang.py) lifts it
            },
            needs={"cc": {"max": 9.9}},
            source="arg_groups/overrides.py:978-986,989",
            why="DeepSeek-V4.1 (hidden 5120) at TP4 on Blackwell runs SGLang's custom all-reduce push plane instead "
            "(unless the custom all-reduce is disabled)",
            effect="ignored",
        ),
        # ---- speculative decoding (--speculative-algorithm)
        Rule(
            field="speculative.method",
            values=("mtp",),
            needs={"draft_heads": {"has": "mtp"}, "family": {"not": ["deepseek_v41"]}},
            source="arg_groups/speculative_hook.py:1120-1146 (NEXTN: the checkpoint's MTP); "
            "arg_groups/deepseek_v4_hook.py:148-158,335-338",
            why="NEXTN (MTP) needs the checkpoint's MTP layers; DeepSeek-V4.1 speculates with DSPARK only",
        ),
        Rule(
            field="speculative.method",
            values=("dspark",),
            needs={"draft_heads": {"has": "dspark"}, "pp": 1},
            source="arg_groups/speculative_hook.py:713-718,757-850",
            why="DSPARK needs the checkpoint's DSpark head and no pipeline parallelism",
        ),
        Rule(
            field="speculative.method",
            values=("mtp",),
            when={"phase": ["both", "decode"]},
            needs={"pp": 1},
            source="arg_groups/validation_hook.py:119-164,196-197 (check_pipeline_parallel_compat)",
            why="pipeline parallelism with NEXTN (MTP) speculation runs only on a prefill server (AssertionError)",
        ),
        Rule(
            field="speculative.method",
            values=(),
            when={"mode": "disaggregated"},
            needs={"speculative.method": {"same_as": "peer.speculative.method"}},
            source="srt/disaggregation/prefill.py:943-950 (the prefill sends draft hidden states only when it "
            "speculates); srt/disaggregation/decode.py:2727-2730; srt/disaggregation/common/conn.py:1359-1373 and "
            "srt/disaggregation/utils.py:1894-1898 (DeepSeek-V4.1 DSpark PD layout mismatch raises)",
            why="prefill and decode must speculate alike: the decode drafts from what the prefill hands over "
            "(DSpark on one side only raises)",
        ),
        Rule(
            field="speculative.method",
            values=("dspark",),
            when={"dp": {"min": 2}},
            needs={"dp_lm_head": True},
            source="arg_groups/speculative_hook.py:676",
            why="DSPARK under DP attention requires --enable-dp-lm-head",
        ),
        Rule(
            field="dcp",
            values=(2, 4, 8),
            needs={"dcp_divides_tp": True, "attention": ["mla"]},
            source="arg_groups/fields/parallel.py (--dcp-size); no CUDA check found beyond DSA/trtllm_mla (evidence)",
            why="decode context parallelism shards MLA latent KV over a divisor of the TP size",
        ),
        Rule(
            field="dcp",
            values=(2, 4, 8),
            when={"cc": [9.0]},
            needs={"kernels.attention": ["triton", "flashinfer"]},
            source="arg_groups/model_override_base.py:336-338 (MLA on Hopper defaults to fa3); "
            "srt/layers/attention/flashattention_backend.py:1451 (its only DCP reference); "
            "srt/layers/dcp/__init__.py:14-26,49-54 (DCP primitives for Triton and FlashInfer-MLA / FlashMLA)",
            why="suspected, not confirmed on a GPU: the default MLA backend on Hopper (fa3) has no DCP merge of "
            "the ranks' partial attention; Triton and FlashInfer-MLA have one",
        ),
        Rule(
            field="kernels.kv_cache_dtype",
            values=(),
            when={"mode": "disaggregated"},
            needs={"kernels.kv_cache_dtype": {"same_as": "peer.kernels.kv_cache_dtype"}},
            source="srt/disaggregation/common/conn.py:1327-1335",
            why="prefill and decode must use the same --kv-cache-dtype (the decode raises at bootstrap)",
        ),
        Rule(
            field="kernels.attention",
            values=(),
            when={"mode": "disaggregated", "attention": ["mha"], "cc": [10.0, 10.3]},
            needs={"kernels.attention": {"same_as": "peer.kernels.attention"}},
            source="srt/disaggregation/common/conn.py:1320-1325 (page size mismatch raises); "
            "arg_groups/model_override_base.py:312-324 (MHA on SM100 defaults to trtllm_mha); "
            "arg_groups/overrides.py:1174-1187 (trtllm_mha forces page_size 64; the CUDA default is 1)",
            why="prefill and decode must run the same attention backend here: on SM100 the default one pages the "
            "KV cache by 64 and the others by 1 (the decode raises at bootstrap)",
        ),
        # ---- DP-attention side flags
        Rule(
            field="dense_dp",
            values=(True,),
            needs={"dp": {"min": 2}},
            source="arg_groups/validation_hook.py:207-211; arg_groups/fields/parallel.py:289-294",
            why="a data-parallel dense MLP (--moe-dense-tp-size 1) only differs from TP under DP attention",
            effect="ignored",
        ),
        Rule(
            field="dense_dp",
            values=(True,),
            needs={"dense_mlp": True},
            source="srt/layers/layer_boundary/layout.py:83-84 and srt/layers/layer_boundary/factories.py:97,130 "
            "(read at dense-MLP layer boundaries)",
            why="--moe-dense-tp-size 1 lays out dense MLP layers; this model has none (very likely a no-op)",
            effect="ignored",
        ),
        Rule(
            field="dp_lm_head",
            values=(True,),
            needs={"dp": {"min": 2}},
            source="arg_groups/overrides.py:1421-1426",
            why="--enable-dp-lm-head asserts DP attention",
        ),
        Rule(
            field="eplb",
            values=(True,),
            needs={"ep": {"min": 2}},
            source="arg_groups/parallel_hook.py:790-791 (handle_eplb_and_dispatch: --enable-eplb asserts ep_size > 1)",
            why="EPLB needs expert parallelism",
        ),
        # ---- hybrid linear-attention families (Qwen3.5 MoE: Gated DeltaNet; GLM-5.3-Flash: KDA + MLA/DSA)
        Rule(
            field="engine",
            values=("sglang",),
            when={"family": ["glm5_next"]},
            needs={"cc": {"min": 9.0}},
            source="arg_groups/model_hook.py:265-285 (Glm5NextForConditionalGeneration takes the DeepSeek DSA "
            "attention path); arg_groups/overrides.py:601-746 (DSA sub-backends: cc >= 9)",
            why="GLM-5.3-Flash's MLA layers run DSA sparse attention, which has no kernel below compute capability 9.0",
        ),
    ),
)
