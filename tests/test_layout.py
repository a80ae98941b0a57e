"""kernels/ and search_spaces/ sit at the top level and ship as autotune.kernels / autotune.search_spaces: the
checkout under test must import its own copies even when another checkout is installed in editable mode."""

import subprocess
import sys
import textwrap
from pathlib import Path

import autotune
import autotune.kernels
import autotune.kernels.moe_configs
import autotune.search_spaces

ROOT = Path(__file__).resolve().parents[1]


def test_every_package_comes_from_this_checkout():
    assert Path(autotune.__file__).resolve() == ROOT / "autotune" / "__init__.py"
    assert Path(autotune.kernels.__file__).resolve() == ROOT / "kernels" / "__init__.py"
    assert Path(autotune.kernels.moe_configs.__file__).resolve() == ROOT / "kernels" / "moe_configs.py"
    assert Path(autotune.search_spaces.__file__).resolve() == ROOT / "search_spaces" / "__init__.py"


# A stand-in for another checkout's editable install: setuptools appends a finder to sys.meta_path that maps the
# remapped names to that checkout's folders (__editable___*_finder.py). Without autotune/__init__'s own mapping the
# name autotune.kernels is not found under this checkout's autotune/ and that finder answers.
SHADOW = """
import importlib.util, sys
from pathlib import Path
other = Path(sys.argv[1])
class EditableFinder:
    @staticmethod
    def find_spec(name, path=None, target=None):
        folder = {"autotune.kernels": other / "kernels", "autotune.search_spaces": other / "search_spaces"}.get(name)
        if folder:
            return importlib.util.spec_from_file_location(
                name, folder / "__init__.py", submodule_search_locations=[str(folder)])
# this venv's own editable finder (if mi-tune is installed editable from this checkout) would answer correctly
# for the wrong reason: leave only the other checkout's
sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in repr(f).lower()]
sys.meta_path.append(EditableFinder())
sys.path.insert(0, sys.argv[2])
import autotune.kernels, autotune.search_spaces
print(autotune.kernels.__file__)
print(autotune.search_spaces.__file__)
"""


def test_another_checkouts_editable_install_does_not_shadow_this_one(tmp_path):
    for name in ("kernels", "search_spaces"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text("OTHER_CHECKOUT = True\n")
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(SHADOW), str(tmp_path), str(ROOT)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    kernels_file, spaces_file = (Path(line).resolve() for line in done.stdout.split())
    assert kernels_file == ROOT / "kernels" / "__init__.py"
    assert spaces_file == ROOT / "search_spaces" / "__init__.py"
