"""The run directory's names are stated once (autotune/specs/rundir.py) and a search writes under them."""

from autotune.specs import rundir


def test_a_search_writes_its_run_directory_under_the_names_rundir_states(searched):
    names = {p.name for p in searched.iterdir()}
    written = {rundir.BEST, rundir.HARDWARE, rundir.MODEL, rundir.TRIALS, rundir.PARETO, rundir.ALTERNATIVES}
    written |= {rundir.SUMMARY, rundir.REPORT_MD, rundir.REPORT_HTML, rundir.MANIFEST, rundir.STUDY_JOURNAL}
    assert written | {rundir.PLOTS} <= names
    assert (searched / rundir.PLOTS).is_dir()


def test_no_module_spells_a_run_directory_name_itself():
    """A string constant equal to a run directory's file name (or moe_configs) outside rundir.py is a second
    statement of the layout (text that mentions a name, such as a docstring or a message, is fine)."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    names = {v for k, v in vars(rundir).items() if k.isupper() and isinstance(v, str) and "." in v}
    names.add(rundir.MOE_CONFIGS)
    found = []
    for path in sorted([*root.joinpath("autotune").rglob("*.py"), *root.joinpath("kernels").rglob("*.py")]):
        rel = path.relative_to(root).as_posix()
        if rel == "autotune/specs/rundir.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and node.value in names:
                found.append(f"{rel}:{node.lineno} {node.value!r}")
    assert not found, "use autotune/specs/rundir.py:\n" + "\n".join(found)
