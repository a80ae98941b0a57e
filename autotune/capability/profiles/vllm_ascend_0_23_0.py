"""vLLM-Ascend 0.23.0.post1 on vLLM 0.23.0: the engine profile (autotune/capability/engine_profile.py). Sources: the
vllm-ascend 0.23.0.post1 source tree (`vllm_ascend/...`) and the vLLM 0.23.0 wheel (`vllm/...`)."""

from __future__ import annotations

from autotune.capability import vllm_ascend_0_23_0 as rules
from autotune.capability.engine_profile import EngineProfile
from autotune.capability.profiles import vllm_0_34_0
from autotune.specs import Batching

VERSION = "0.23.0.post1"


def default_batching(memory_gib: float, gpu_name: str, arch: str) -> Batching:
    """What vLLM 0.23's `vllm serve` picks on the NPU platform: vllm_ascend/platform.py:275-281 does not implement
    get_device_total_memory (NotImplementedError), so vllm/engine/arg_utils.py:2305-2311 of 0.23.0 reads the device
    memory as 0 and :2316-2336 give the small tier: 2048 batched tokens, 256 seqs, whatever the NPU."""
    return Batching(max_running=256, chunked_prefill_tokens=2048)


PROFILE = EngineProfile(
    engine="vllm-ascend",
    # `vllm serve` of vLLM 0.23.0 with the plugin: autotune/engines/flags/vllm-ascend-0.23.0.post1.yaml is
    # autotune/engines/flags/vllm-0.23.0.yaml (the real 0.23 parser) plus what the plugin adds (its `derived` block)
    version=VERSION,
    install=f"pip install vllm==0.23.0 vllm-ascend=={VERSION}",
    server_command=("vllm", "serve"),
    vendors=("huawei",),  # vllm_ascend/platform.py:130-134: NPUPlatform, device_type "npu"
    vendor_source="vllm_ascend/platform.py:130-134 (NPUPlatform: device_type npu, ASCEND_RT_VISIBLE_DEVICES)",
    # vllm_ascend/platform.py:134 device_control_env_var; indices are npu-smi's logical NPU ids (the probe's)
    visible_devices_env=(("ASCEND_RT_VISIBLE_DEVICES", "{gpus}"),),
    rules=rules.RULES,
    default_batching=default_batching,
    mixed_prefill_chunks=True,  # vLLM's chunked prefill (as vLLM 0.34)
    # vLLM 0.23 also turns async scheduling on by default (vllm/config/vllm.py:957-996 of 0.23.0)
    overlap_under_pp=True,
    # vLLM 0.23's async scheduling runs 2 batches in flight at pp 1, one ahead as 0.34; at pp > 1 its V1 model runner
    # keeps pp, none ahead (vllm/config/vllm.py:497-507 of 0.23.0; the V2 runner, pp + 1, is not its default there)
    overlap_scheduled_ahead=lambda pp: int(pp == 1),
    scheduler_cpu_ms=0.5,  # prior: vLLM's figure
    memory_budget="gpu_memory_utilization",  # vLLM's worker arithmetic
    tp_spans_dp=False,  # vLLM's DP ranks are separate engines
    chunk_split_over_dp=False,  # each DP engine core schedules its own max_num_batched_tokens (as vLLM 0.34)
    separate_state_pool=False,
    states_per_request=vllm_0_34_0.PROFILE.states_per_request,  # vLLM 0.34's figure, not re-read for 0.23
    triton_mla_archs=(),  # no CUDA arch on an NPU
    auto_moe_kernel=vllm_0_34_0.auto_moe_kernel,  # vLLM 0.34's picks, as before the profiles (no CUDA arch matches)
    moe_configs=None,  # no fused-MoE Triton config files on Ascend
    ascend_platform=True,  # vllm_ascend/platform.py:130-134 NPUPlatform (autotune/perf/ascend.py)
    # vLLM finds the NPU platform through the plugin's `vllm.platform_plugins` entry point
    # (vllm/plugins/__init__.py:19-34 of 0.23.0), which calls vllm_ascend/__init__.py:38 register(): `vllm` alone has
    # no NPU platform
    plugin_modules=("vllm_ascend",),
)
