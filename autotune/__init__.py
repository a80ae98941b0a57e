"""mi-tune: measure the box, model the model on it, search the plans, hand over a launch."""

__version__ = "0.1.0"


def _use_checkout_subpackages() -> None:
    """In a source checkout, autotune.kernels / autotune.search_spaces are the checkout's top-level kernels/ and
    search_spaces/ (pyproject's package-dir remap). An editable install of another checkout maps those names to
    its own folders through a finder that would otherwise answer first (autotune/ of this checkout has no kernels/),
    so a checkout puts its own mapping in front. An installed wheel has no pyproject.toml beside the package and
    keeps setuptools' layout (autotune/kernels inside the package)."""
    import importlib.util
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    if not (root / "pyproject.toml").is_file() or not (root / "kernels" / "__init__.py").is_file():
        return
    folders = {"autotune.kernels": root / "kernels", "autotune.search_spaces": root / "search_spaces"}

    class CheckoutFinder:
        @staticmethod
        def find_spec(name, path=None, target=None):
            folder = folders.get(name)
            if folder is None:
                return None
            return importlib.util.spec_from_file_location(
                name, folder / "__init__.py", submodule_search_locations=[str(folder)]
            )

    if not any(type(f).__name__ == "CheckoutFinder" and getattr(f, "root", None) == root for f in sys.meta_path):
        finder = CheckoutFinder()
        finder.root = root
        sys.meta_path.insert(0, finder)


_use_checkout_subpackages()
