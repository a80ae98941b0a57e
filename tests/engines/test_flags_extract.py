import argparse
import importlib.util
from pathlib import Path

import autotune.engines

EXTRACTOR = Path(autotune.engines.__file__).parent / "flags_extract.py"


def load_extractor():
    spec = importlib.util.spec_from_file_location("flags_extract", EXTRACTOR)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_parser_to_flags_lists_every_option_string_with_values_and_choices():
    parser = argparse.ArgumentParser()
    parser.add_argument("model", nargs="?")
    parser.add_argument("--tensor-parallel-size", "-tp", type=int)
    parser.add_argument("--enable-dbo", action=argparse.BooleanOptionalAction)
    parser.add_argument("--mode", choices=["a", "b"])
    parser.add_argument("--prefill", nargs="+", action="append")
    parser.add_argument("--quiet", action="store_true")
    flags, positionals = load_extractor().parser_to_flags(parser)
    assert positionals == [{"dest": "model", "nargs": "?"}]
    assert flags == {
        "--tensor-parallel-size": {"aliases": ["-tp"], "value": True},
        "--enable-dbo": {"aliases": ["--no-enable-dbo"], "value": False},
        "--mode": {"value": True, "choices": ["a", "b"]},
        "--prefill": {"value": True, "nargs": "+"},
        "--quiet": {"value": False},
    }


def test_stubbed_imports_absorb_attribute_calls_and_decorators():
    extractor = load_extractor()
    stub = extractor._StubModule("fake_torch")
    assert not hasattr(stub, "npu")  # platform probes must not find accelerators

    @stub.compile
    def f():
        return 1

    assert f() == 1
    assert not stub.cuda.is_available()
    assert isinstance(stub.nn.Module, type)
