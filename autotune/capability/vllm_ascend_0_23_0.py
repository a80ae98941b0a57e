"""vLLM-Ascend 0.23.0.post1 on vLLM 0.23.0: what `vllm serve` accepts on a Huawei Ascend box.

Sources: the vllm-ascend 0.23.0.post1 source tree (`vllm_ascend/...`, PyPI sdist vllm_ascend-0.23.0.post1.tar.gz)
and the vLLM 0.23.0 wheel (`vllm/...`). SoC facts: `soc` is the accelerator arch (catalog.devices:
ascend910b = A2, ascend910c = A3, ascend310p = 310P; vllm_ascend/utils.py:824-828 AscendDeviceType).
"""

from autotune.capability.rules import Rule, RuleTable

SPARSE_ATTENTION_FAMILIES = ["deepseek_v32", "deepseek_v4", "deepseek_v41", "glm_moe_dsa"]
NOT_ON_NPU = {"vendor": ["nvidia"]}  # a CUDA-only choice: false on every Ascend box

RULES = RuleTable(
    engine="vllm-ascend",
    version="0.23.0.post1",
    rules=(
        # ---- the model on the SoC: the 310P worker refuses MLA, sparse attention and KV transfer
        Rule(
            field="engine",
            values=("vllm-ascend",),
            when={"soc": ["ascend310p"]},
            needs={"attention": {"not": ["mla"]}, "family": {"not": SPARSE_ATTENTION_FAMILIES}},
            source="vllm_ascend/_310p/model_runner_310p.py:742-746",
            why="310P runs neither MLA nor DeepSeek sparse attention",
        ),
        Rule(
            field="mode",
            values=("disaggregated",),
            needs=NOT_ON_NPU,
            source="autotune/engines/vllm_ascend.py build_launch (the plugin's P/D runs through its Mooncake "
            "connectors, vllm_ascend/distributed/kv_transfer/, which mi-tune does not launch yet; 310P has no KV "
            "transfer at all: vllm_ascend/_310p/model_runner_310p.py:738-740)",
            why="mi-tune emits aggregated vllm-ascend plans only",
        ),
        # ---- kernels: the platform selects its own attention backends and MoE ops; CUDA names do not apply
        Rule(
            field="kernels.attention",
            values=("flashinfer", "triton"),
            needs=NOT_ON_NPU,
            source="vllm_ascend/platform.py:815-850 (get_attn_backend_cls maps to Ascend backends only)",
            why="the NPU platform picks its own attention backend (AscendAttentionBackend / MLA / SFA)",
            effect="ignored",
        ),
        Rule(
            field="kernels.moe",
            values=("triton", "cutlass", "marlin", "deep_gemm", "flashinfer_cutlass", "b12x", "flashinfer_mxfp4"),
            needs=NOT_ON_NPU,
            source="vllm_ascend/ops/fused_moe/fused_moe.py:97 (the plugin's own fused-MoE methods replace vLLM's)",
            why="MoE layers run the plugin's fused MoE (MC2 / all-gather dispatch); CUDA MoE kernels do not exist",
        ),
        Rule(
            field="kernels.linear",
            values=("cutlass", "triton"),
            needs=NOT_ON_NPU,
            source="vllm_ascend/platform.py:128-145 (NPUPlatform; quantised GEMMs from vllm_ascend/quantization)",
            why="CUDA GEMM backends do not exist on the NPU",
        ),
        # ---- communication: HCCL through the plugin's communicator
        Rule(
            field="comm.allreduce",
            values=("pcie_ipc", "nccl"),
            needs=NOT_ON_NPU,
            source="vllm_ascend/distributed/device_communicators/npu_communicator.py:23 (NPUCommunicator: HCCL)",
            why="all-reduce is HCCL on the NPU: no CUDA custom or PCIe-IPC kernel to switch",
            effect="ignored",
        ),
        Rule(
            field="comm.all2all",
            values=("deepep",),
            needs=NOT_ON_NPU,
            source="vllm_ascend/platform.py:659-662 (all2all_backend overridden to flashinfer_all2allv without SP)",
            why="the plugin sets its own all-to-all backend; DeepEP is CUDA-only",
            effect="ignored",
        ),
        Rule(
            field="overlap.two_batch",
            values=(True,),
            needs=NOT_ON_NPU,
            source="vllm/config/vllm.py:2024-2025 (0.23: dual batch overlap unsupported with this config); "
            "vllm_ascend/platform.py:659-662 (no DeepEP backend)",
            why="--enable-dbo needs a DeepEP all2all backend, which the NPU platform never selects",
        ),
        Rule(
            field="eplb",
            values=(True,),
            needs=NOT_ON_NPU,
            source="vllm/config/parallel.py:459-463 (0.23: EPLB only on CUDA/ROCm)",
            why="vLLM's --enable-eplb raises on a non-CUDA platform (the plugin's dynamic EPLB is not emitted)",
        ),
        *(
            Rule(
                field=f"comm.nccl.{name}",
                values=values,
                needs=NOT_ON_NPU,
                source="vllm_ascend/platform.py:134 (NPU workers communicate through HCCL, not NCCL)",
                why="NCCL variables do not reach HCCL",
                effect="ignored",
            )
            for name, values in (
                ("NCCL_PROTO", ("LL", "Simple")),
                ("NCCL_MIN_NCHANNELS", ("8",)),
                ("NCCL_P2P_LEVEL", ("SYS",)),
            )
        ),
        # ---- speculative decoding
        Rule(
            field="speculative.method",
            values=("mtp",),
            needs={"draft_heads": {"has": "mtp"}},
            source="vllm_ascend/spec_decode/__init__.py:43 (mtp via the eagle proposer: the MTP layers)",
            why="MTP needs the checkpoint's MTP layers",
        ),
        Rule(
            field="speculative.method",
            values=("dspark", "eagle"),
            needs=NOT_ON_NPU,
            source="vllm_ascend/spec_decode/__init__.py:34-50 (proposers: ngram, suffix, medusa, eagle/eagle3/mtp, "
            "dflash, draft_model; no dspark)",
            why="mi-tune emits no draft model for the NPU and DSpark is not in vLLM 0.23",
        ),
        Rule(
            field="dcp",
            values=(2, 4, 8),
            needs={"dcp_divides_tp": True, "attention": ["mla"]},
            source="vllm/config/parallel.py:487-490 (0.23); vllm_ascend/platform.py:374-409 (DCP checks)",
            why="the decode context parallel size must divide the tensor parallel size (MLA models)",
        ),
        # ---- batching
        Rule(
            field="batching.chunked_prefill_tokens",
            values=(),
            needs={"chunk_covers_running": True},
            source="vllm/config/scheduler.py:273 (0.23)",
            why="max_num_batched_tokens must be >= max_num_seqs",
        ),
        Rule(
            field="batching.cuda_graph_max_bs",
            values=(),
            needs={"batching.cuda_graph_max_bs": None},
            source="autotune/engines/vllm_ascend.py (no capture-size option emitted: the NPU's graph mode is "
            "platform.graph_mode, vllm_ascend/ascend_config.py)",
            why="mi-tune sets vllm-ascend's ACL graph through its own graph mode, not a CUDA-graph batch size",
            effect="ignored",
        ),
        # ---- platform options (--additional-config, HCCL env)
        Rule(
            field="platform.flashcomm1",
            values=("on",),
            needs={"tp": {"min": 2}},
            source="vllm_ascend/ascend_config.py:84-88; vllm_ascend/utils.py:903-929 (enable_sp: sequence "
            "parallel over the TP group)",
            why="FlashComm1 (reduce-scatter + all-gather in place of all-reduce) needs a TP group",
            effect="ignored",
        ),
        Rule(
            field="platform.multistream_shared_expert",
            values=("on",),
            needs={"moe": True, "shared_experts": True},
            source="vllm_ascend/ascend_config.py:139 (multistream_overlap_shared_expert); ops/fused_moe/",
            why="overlapping shared experts needs a MoE model with shared experts",
            effect="ignored",
        ),
        # ---- SGLang-only plan fields
        Rule(
            field="dense_dp",
            values=(True,),
            needs={"engine": "sglang"},
            source="autotune/engines/flags/vllm-0.23.0.yaml (no --moe-dense-tp-size)",
            why="vLLM has no data-parallel dense MLP option",
        ),
        Rule(
            field="dp_lm_head",
            values=(True,),
            needs={"engine": "sglang"},
            source="autotune/engines/flags/vllm-0.23.0.yaml (no --enable-dp-lm-head)",
            why="vLLM has no DP LM head option",
        ),
    ),
)
