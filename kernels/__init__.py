"""Triton kernels for the decode hot path, each beside a torch reference; see README.md.

Importing this package needs neither torch nor triton: they load when a kernel is checked, benched or tuned.
"""

from autotune.kernels.bench import bench
from autotune.kernels.check import CheckResult, check
from autotune.kernels.registry import KERNEL_NAMES, KernelEntry, get_entry
from autotune.kernels.tune import tune

__all__ = ["KERNEL_NAMES", "CheckResult", "KernelEntry", "bench", "check", "get_entry", "tune"]
