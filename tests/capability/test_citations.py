"""Every `file:line` a capability rule cites exists in the engine wheel the rule table is for: the file is there
and each cited line is inside it. The wheels are unpacked under MI_TUNE_ENGINE_SRC (default /tmp/wheels/src;
.ci/run downloads them: vllm 0.34.0, sglang 0.5.23, vllm 0.23.0 wheels unzipped into vllm/, sglang/, vllm-0.23.0/,
and the vllm-ascend 0.23.0.post1 sdist unpacked into vllm-ascend/).
Without them the test fails: `make test` fetches them (.ci/test_deps.sh)."""

import importlib
import os
import re
from pathlib import Path

import pytest

from autotune import capability
from autotune.capability.profiles import PROFILES
from autotune.capability.rules import RuleTable

ENGINE_SRC = Path(os.environ.get("MI_TUNE_ENGINE_SRC", "/tmp/wheels/src"))
REPO = Path(__file__).resolve().parents[2]
# (engine, version) of a rule table -> {a cited path's first component: where it lives under ENGINE_SRC}. A table for
# another engine version needs its source named here (and downloaded by .ci/run).
# The vendor rules capability/__init__.py adds to every table cite the plugin that reads a vendor's checkpoints.
PLUGIN = {"vllm_ascend/": "vllm-ascend/vllm_ascend/"}
ENGINE_SOURCES: dict[tuple[str, str], dict[str, str]] = {
    ("vllm", "0.34.0"): {"vllm/": "vllm/vllm/", **PLUGIN},
    ("sglang", "0.5.23"): {
        "srt/": "sglang/sglang/srt/",
        "arg_groups/": "sglang/sglang/srt/arg_groups/",
        "sglang/": "sglang/sglang/",
        **PLUGIN,
    },
    # the plugin's source (the sdist: no wheel for every platform) and the vLLM it pairs with
    ("vllm-ascend", "0.23.0.post1"): {"vllm_ascend/": "vllm-ascend/vllm_ascend/", "vllm/": "vllm-0.23.0/vllm/"},
}
# a path (.py / .yaml) with optional :lines, or a bare :lines continuing the previous path ("... :3378-3408")
CITATION = re.compile(
    r"(?P<path>[A-Za-z_][\w/.-]*\.(?:py|yaml))(?::(?P<lines>\d[\d,-]*))?|(?<=[\s(]):(?P<more>\d[\d,-]*)"
)


def citations(source: str) -> list[tuple[str, list[int]]]:
    """(cited path, the last line of each cited range) in the order they appear; a bare `:lines` belongs to the
    path before it."""
    found: list[tuple[str, list[int]]] = []
    for m in CITATION.finditer(source):
        if m.group("path"):
            found.append((m.group("path"), []))
        lines = (m.group("lines") or m.group("more") or "").strip(",-")
        if lines and found:
            found[-1][1].extend(int(part.split("-")[-1]) for part in lines.split(",") if part)
    return found


def resolve(table: RuleTable, path: str) -> Path | str:
    """Where a cited path lives, or why it cannot be placed."""
    if path.startswith("autotune/"):
        return REPO / path
    prefixes = ENGINE_SOURCES[(table.engine, table.version)]
    for prefix, target in prefixes.items():
        if path.startswith(prefix):
            return ENGINE_SRC / (target + path[len(prefix) :])
    return f"{path}: not a path from the package root (starts with one of {', '.join(prefixes)})"


def _tables_with_source() -> list[RuleTable]:
    tables = list(capability.TABLES.values())
    unknown = [t.label for t in tables if (t.engine, t.version) not in ENGINE_SOURCES]
    assert not unknown, f"rule tables with no engine source named in ENGINE_SOURCES: {unknown}"
    missing = [
        t.label
        for t in tables
        if not all((ENGINE_SRC / d).is_dir() for d in ENGINE_SOURCES[(t.engine, t.version)].values())
    ]
    if missing:  # `make test` downloads them (.ci/test_deps.sh)
        pytest.fail(f"no unpacked engine source under {ENGINE_SRC} for {', '.join(missing)}: run `make test`")
    return tables


def test_citation_parser_reads_ranges_and_continuations():
    got = citations("vllm/config/vllm.py:2090-2115 (a2a); :3378-3408 (PP); vllm/x.py:359,393-396; flags/v.yaml (no)")
    assert got == [("vllm/config/vllm.py", [2115, 3408]), ("vllm/x.py", [359, 396]), ("flags/v.yaml", [])]


def test_every_cited_file_and_line_exists_in_the_pinned_wheel():
    problems = []
    for table in _tables_with_source():
        for rule in table.rules:
            cited = citations(rule.source)
            if not cited:
                problems.append(f"{table.label} {rule.field}: cites no file ({rule.source})")
            for path, last_lines in cited:
                where = resolve(table, path)
                if isinstance(where, str):
                    problems.append(f"{table.label} {rule.field}: {where}")
                    continue
                if not where.is_file():
                    problems.append(f"{table.label} {rule.field}: {path} is not in the wheel ({where})")
                    continue
                length = len(where.read_text(errors="replace").splitlines())
                problems += [
                    f"{table.label} {rule.field}: {path}:{line} is beyond the file's {length} lines"
                    for line in last_lines
                    if line > length
                ]
    assert not problems, "\n".join(problems)


def _profile_modules() -> list:
    folder = REPO / "autotune" / "capability" / "profiles"
    names = sorted(p.stem for p in folder.glob("*.py") if p.stem != "__init__")
    return [importlib.import_module(f"autotune.capability.profiles.{name}") for name in names]


def test_every_file_and_line_a_profile_cites_exists_in_its_wheel():
    """The engine profiles (capability/profiles/*.py) cite their engine's source in comments and docstrings: each
    cited `file:line` must be in the wheel of the profile's own engine version (a copied profile fails until its
    citations are re-checked against the new wheel)."""
    modules = _profile_modules()
    assert {m.PROFILE.engine for m in modules} == set(PROFILES)  # every profile module is registered
    _tables_with_source()  # the unpacked wheels are there
    problems = []
    for module in modules:
        table, text = module.PROFILE.rules, Path(module.__file__).read_text()
        for path, last_lines in citations(text):
            where = resolve(table, path)
            if isinstance(where, str) or not where.is_file():
                problems.append(f"{module.PROFILE.label}: {where if isinstance(where, str) else path} not in the wheel")
                continue
            length = len(where.read_text(errors="replace").splitlines())
            problems += [f"{module.PROFILE.label}: {path}:{n} beyond {length} lines" for n in last_lines if n > length]
    assert not problems, "\n".join(problems)
