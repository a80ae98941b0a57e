"""autotune/catalog/calibration.yaml is the provenance of every `public:<id>` rate: it must parse with
yaml.safe_load (two entries once did not: an unquoted ': ' inside a source line), every entry must carry its
source and setup, and every id the code cites must be an entry of it or of shared/reference/calibration.yaml."""

import re
from importlib.resources import files
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
# Cited ids that live in the founding reference file (shared/reference/calibration.yaml, beside the checkout, not
# part of it); checked against that file where it is present.
SHARED_REFERENCE_IDS = {"kernel-flashmla-h800-decode", "kernel-l20-hgemm-cublas", "pcie-rtx6kpro-nccl-allreduce-8gpu"}
CITATION = re.compile(r"(?:public:|calibration id |calibration\.yaml )([a-z0-9][a-z0-9.]*-[a-z0-9.-]*[a-z0-9])")


def _entries() -> list[dict]:
    document = yaml.safe_load((files("autotune.catalog") / "calibration.yaml").read_text())
    assert isinstance(document, dict) and isinstance(document.get("entries"), list)
    return document["entries"]


def test_every_entry_has_an_id_a_source_and_a_setup():
    entries = _entries()
    ids = [e.get("id") for e in entries]
    assert len(ids) == len(set(ids)), "duplicate calibration ids"
    for entry in entries:
        assert isinstance(entry.get("id"), str) and entry.get("category"), entry.get("id")
        assert isinstance(entry.get("source"), dict) and entry["source"].get("url"), entry["id"]
        assert entry.get("setup") and entry.get("metrics"), entry["id"]


def test_every_cited_id_is_an_entry():
    known = {e["id"] for e in _entries()} | SHARED_REFERENCE_IDS
    cited: dict[str, str] = {}
    for path in sorted((ROOT / "autotune").rglob("*.py")) + sorted((ROOT / "tests").rglob("*.py")):
        for match in CITATION.finditer(path.read_text()):
            cited.setdefault(match.group(1), str(path.relative_to(ROOT)))
    assert len(cited) >= 10  # the pattern still finds the citations
    missing = {i: where for i, where in cited.items() if i not in known}
    assert not missing, f"cited calibration ids with no entry: {missing}"
    reference = ROOT.parent / "shared" / "reference" / "calibration.yaml"
    if reference.is_file():  # the founding files beside the checkout (not part of it): the recorded list holds there
        assert SHARED_REFERENCE_IDS <= {e["id"] for e in yaml.safe_load(reference.read_text())}

