"""Fused-MoE Triton configs the engines read (moe_configs: names, shapes, space; moe_tune: the tuner) and mi-tune's
own fused-MoE kernel (fused_moe, timed where no engine is installed; check: against torch). See README.md.

Importing this package needs neither torch nor triton: they load when a kernel is checked or timed.
"""

from autotune.kernels.check import check

__all__ = ["check"]
