"""A non-editable install carries every package of the source tree (the CLI among them) and the data files:
catalog, presets, search space, engine flag tables."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[1]

CHECK = """
import autotune, sys
from autotune.catalog import list_models, list_presets
from autotune.catalog.models import CATALOG
from autotune.search import load_space
from autotune.engines.flags import ENGINE_VERSIONS, validate_argv
assert autotune.__file__.startswith(sys.argv[1]), autotune.__file__
assert len(list_models()) == len(CATALOG) >= 12 and len(list_presets()) >= 6
assert load_space().dimension("tp")
validate_argv("vllm", ENGINE_VERSIONS["vllm"], ["vllm", "serve", "m", "-tp", "2"])
import importlib.util
import autotune.kernels, autotune.search_spaces
from autotune.kernels import moe_configs, moe_tune
for module in (autotune.kernels, autotune.search_spaces, moe_configs, moe_tune):
    assert module.__file__.startswith(sys.argv[1]), module.__file__
assert importlib.util.find_spec("autotune.kernels.fused_moe").origin.startswith(sys.argv[1])
from pathlib import Path
source = Path(sys.argv[2]) / "autotune"
wanted = sorted(".".join(("autotune", *p.parent.relative_to(source).parts)) for p in source.rglob("__init__.py"))
missing = [name for name in wanted if importlib.util.find_spec(name) is None
           or not importlib.util.find_spec(name).origin.startswith(sys.argv[1])]
assert not missing, f"packages the wheel lacks (pyproject.toml [tool.setuptools] packages): {missing}"
from autotune.cli import main
print("ok")
"""


def test_wheel_install_finds_its_data_files(tmp_path):
    wheel_dir, target = tmp_path / "wheel", tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(wheel_dir), str(ROOT)],
        check=True,
        capture_output=True,
    )
    wheel = next(wheel_dir.glob("mi_tune-*.whl"))
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target), str(wheel)],
        check=True,
        capture_output=True,
    )
    env = {**os.environ, "PYTHONPATH": str(target)}
    done = subprocess.run(
        [sys.executable, "-c", CHECK, str(target), str(ROOT)], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
