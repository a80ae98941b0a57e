"""Data contracts: frozen dataclasses shared by every layer (see DESIGN.md, "Data contracts")."""

from autotune.specs.best import Baseline, BestConfig, HardwareRef, Launch, ModelRef, ProcessSpec, Provenance
from autotune.specs.errors import MiTuneError, SpecError
from autotune.specs.hardware import Accelerator, CollectivePoint, Features, HardwareProfile, HostInfo, Measured
from autotune.specs.io import check_schema, dump_json, dump_yaml, from_dict, load, read_document, save, to_dict
from autotune.specs.model import DTYPE_BYTES, AttentionSpec, FfnSpec, LayerSpec, ModelSpec, stored_bytes
from autotune.specs.plan import Batching, Comm, Kernels, Overlap, PhasePlan, Plan, Speculative
from autotune.specs.prediction import MemoryFit, Prediction, StepBreakdown
from autotune.specs.workload import Workload


def load_hardware(path) -> HardwareProfile:
    return load(HardwareProfile, path, "hardware")


def plan_from_document(data: dict, where: str) -> Plan:
    """The plan of a parsed plan file, or of a best.yaml (whose plan fields sit at its top level)."""
    if data.get("schema") == "mi-tune/best/v1":
        return from_dict(BestConfig, data, where).plan
    check_schema(data, "plan", where)
    return from_dict(Plan, data, where)


def load_plan(path) -> Plan:
    return plan_from_document(read_document(path), str(path))


def load_best(path) -> BestConfig:
    return load(BestConfig, path, "best")


def load_workload(path) -> Workload:
    return load(Workload, path, "workload")


__all__ = [
    "Accelerator",
    "AttentionSpec",
    "Baseline",
    "Batching",
    "BestConfig",
    "CollectivePoint",
    "Comm",
    "DTYPE_BYTES",
    "Features",
    "FfnSpec",
    "HardwareProfile",
    "HardwareRef",
    "HostInfo",
    "Kernels",
    "Speculative",
    "LayerSpec",
    "Launch",
    "Measured",
    "MemoryFit",
    "MiTuneError",
    "ModelRef",
    "ModelSpec",
    "Overlap",
    "PhasePlan",
    "Plan",
    "Prediction",
    "ProcessSpec",
    "Provenance",
    "SpecError",
    "StepBreakdown",
    "Workload",
    "dump_json",
    "dump_yaml",
    "from_dict",
    "load",
    "load_best",
    "load_hardware",
    "load_plan",
    "load_workload",
    "plan_from_document",
    "read_document",
    "save",
    "to_dict",
    "stored_bytes",
]
