"""Workload inputs: a workload YAML (`--workload FILE`), built-in length profiles (`--dataset NAME`,
catalog/datasets.yaml) and a lengths file's means, combined into one Workload."""

from __future__ import annotations

import dataclasses
from functools import cache
from importlib.resources import files

import yaml

from autotune.sim.trace import mean_lengths
from autotune.specs import MiTuneError, SpecError, Workload, from_dict, read_document

SCHEMA = "mi-tune/workload/v1"


@cache
def datasets() -> dict[str, dict]:
    """Built-in length profiles: name -> {isl, osl, source, ...}."""
    return yaml.safe_load(files("autotune.catalog").joinpath("datasets.yaml").read_text())


def dataset_fields(name: str) -> dict:
    """The Workload fields a built-in length profile sets."""
    profile = datasets().get(name)
    if profile is None:
        raise MiTuneError(f"--dataset: expected one of {', '.join(sorted(datasets()))}, got '{name}'")
    fields = {k: v for k, v in profile.items() if k in {f.name for f in dataclasses.fields(Workload)}}
    return {**fields, "dataset": name}


def load_workload_file(path: str) -> Workload:
    """A workload YAML; the schema line may be left out (it can only be this one)."""
    data = read_document(path)
    schema = data.setdefault("schema", SCHEMA)
    if schema != SCHEMA:
        raise SpecError(f"{path}: schema: expected '{SCHEMA}', got {schema!r}")
    return with_file_means(from_dict(Workload, data, path))


def with_file_means(w: Workload) -> Workload:
    """A workload whose lengths come from a file carries the file's mean lengths as isl/osl (the steady-state
    screen and the memory fit use them)."""
    if w.length_dist != "file":
        return w
    isl, osl = mean_lengths(w.lengths_file)
    return dataclasses.replace(w, isl=isl, osl=osl)


def build(base: Workload | None, dataset: str | None, overrides: dict) -> Workload:
    """`base` (from --workload, or the defaults), then the dataset's lengths, then the flags in `overrides`."""
    fields = dataclasses.asdict(base or Workload())
    fields.pop("ttft_percentile", None)
    if dataset:
        fields.update(dataset_fields(dataset))
    fields.update(overrides)
    try:
        return with_file_means(Workload(**fields))
    except ValueError as exc:
        raise MiTuneError(f"workload: {exc}") from None
