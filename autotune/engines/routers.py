"""The router in front of several engine instances: vllm-router for vLLM, sglang-router for SGLang.

Each builder follows common.FrontFn: (instances, host, port) -> (argv, name of the pinned flag table that checks it).
The router binds `host`:`port`; the instances behind it are reached through their own URLs.
"""

from __future__ import annotations

from collections.abc import Callable

from autotune.engines.layout import Instance

VLLM_ROUTER = "vllm-router"  # flags/vllm-router-<ENGINE_VERSIONS[VLLM_ROUTER]>.yaml
VLLM_ROUTER_COMMAND = ["python3", "-m", "vllm_router.launch_router"]  # the wheel's `vllm-router` console script
VLLM_ROUTER_POLICY = "round_robin"  # the serving simulator splits load evenly; the router's default is cache_aware
# vllm.NIXL_KV_TRANSFER: NIXL pulls the KV cache from the prefiller, so --prefill takes no bootstrap port
VLLM_ROUTER_KV_CONNECTOR = "nixl"
SGLANG_ROUTER = "sglang-router"
SGLANG_ROUTER_COMMAND = ["python3", "-m", "sglang_router.launch_router"]


def _replicated(placed: tuple[Instance, ...]) -> bool:
    return any(i.role == "server" for i in placed)


def vllm_router(placed: tuple[Instance, ...], host: str, port: int) -> tuple[list[str], str]:
    """vllm-router over replicas (--worker-urls), or over NIXL prefill/decode instances (--vllm-pd-disaggregation)."""
    if _replicated(placed):
        workers = ["--worker-urls", *(i.url for i in placed)]
    else:
        prefill = [a for i in placed if i.role == "prefill" for a in ("--prefill", i.url)]
        decode = [a for i in placed if i.role == "decode" for a in ("--decode", i.url)]
        workers = ["--vllm-pd-disaggregation", "--kv-connector", VLLM_ROUTER_KV_CONNECTOR, *prefill, *decode]
    argv = [*VLLM_ROUTER_COMMAND, *workers, "--policy", VLLM_ROUTER_POLICY, "--host", host, "--port", str(port)]
    return argv, VLLM_ROUTER


def sglang_router(
    placed: tuple[Instance, ...], host: str, port: int, bootstrap_port: Callable[[Instance], int]
) -> tuple[list[str], str]:
    """sglang-router over replicas, or over prefill (URL + its bootstrap port) and decode instances."""
    if _replicated(placed):
        workers = ["--worker-urls", *(i.url for i in placed)]
    else:
        prefill = [a for i in placed if i.role == "prefill" for a in ("--prefill", i.url, str(bootstrap_port(i)))]
        decode = [a for i in placed if i.role == "decode" for a in ("--decode", i.url)]
        workers = ["--pd-disaggregation", *prefill, *decode]
    return [*SGLANG_ROUTER_COMMAND, *workers, "--host", host, "--port", str(port)], SGLANG_ROUTER
