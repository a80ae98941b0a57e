"""Which accelerator vendor each engine runs on, and the engine-platform options only one engine expresses.

One place for the vendor rule ("a box is served only by engines that run on its vendor"): capability/__init__.py
appends these rules to every engine's table, so search, emitters and estimate all read them. The vendors come
from the engine profiles (capability/profiles/); the options and formats only one engine expresses are listed here.
"""

from __future__ import annotations

from autotune.capability.profiles import PROFILES
from autotune.capability.rules import Rule

# engine -> vendors (HardwareProfile accelerator `vendor`) whose devices it drives: its profile's, with the source
ENGINE_VENDORS: dict[str, tuple[str, ...]] = {e: p.vendors for e, p in PROFILES.items()}
VENDOR_SOURCES = {e: p.vendor_source for e, p in PROFILES.items()}
# plan `platform.<name>` options (PhasePlan.platform) -> the engines that express them
PLATFORM_ENGINES: dict[str, tuple[str, ...]] = {
    "graph_mode": ("vllm-ascend",),
    "flashcomm1": ("vllm-ascend",),
    "weight_nz": ("vllm-ascend",),
    "multistream_shared_expert": ("vllm-ascend",),
    "hccl_op_expansion": ("vllm-ascend",),
    "hccl_buffsize_mb": ("vllm-ascend",),
}


def vendor_rule(engine: str) -> Rule:
    return Rule(
        field="engine",
        values=(),
        needs={"vendor": list(ENGINE_VENDORS[engine])},
        source=VENDOR_SOURCES[engine],
        why=f"{engine} runs on {', '.join(ENGINE_VENDORS[engine])} accelerators only",
    )


# checkpoint formats only one engine loads: msModelSlim W8A8 (catalog/models.py modelslim_formats)
FORMAT_ENGINES: dict[str, tuple[str, ...]] = {"w8a8_modelslim": ("vllm-ascend",)}
FORMAT_SOURCES = {
    "w8a8_modelslim": "vllm_ascend/quantization/modelslim_config.py:456-509 (the 'ascend' quantization method)"
}


def format_rules(engine: str) -> tuple[Rule, ...]:
    return tuple(
        Rule(
            field="engine",
            values=(),
            when={"dense_format": [fmt]},
            needs={"engine": list(engines)},
            source=FORMAT_SOURCES[fmt],
            why=f"a {fmt} checkpoint loads only through {', '.join(engines)}",
        )
        for fmt, engines in FORMAT_ENGINES.items()
        if engine not in engines
    )


def platform_rules(engine: str) -> tuple[Rule, ...]:
    """Refuse a platform option on an engine that cannot express it (it would be dropped, yet modelled)."""
    return tuple(
        Rule(
            field=f"platform.{name}",
            values=(),
            needs={"engine": list(engines)},
            source="autotune/capability/vendors.py PLATFORM_ENGINES",
            why=f"only {', '.join(engines)} expresses platform option {name}",
            effect="ignored",
        )
        for name, engines in PLATFORM_ENGINES.items()
        if engine not in engines
    )


def unserved_vendor(vendor: str, engines: tuple[str, ...]) -> str:
    """One line when no engine of `engines` runs on `vendor` ('' otherwise)."""
    if any(vendor in ENGINE_VENDORS.get(e, ()) for e in engines):
        return ""
    runs = "; ".join(f"{e}: {', '.join(ENGINE_VENDORS.get(e, ('?',)))}" for e in engines)
    return f"{vendor} accelerators are detected and modelled, but no engine mi-tune emits serves them yet ({runs})"
