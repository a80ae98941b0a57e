"""Probe: the box as a HardwareProfile (NVML, sysfs PCI tree, /proc host facts)."""

from autotune.probe.profile import ProbeResult, probe, probe_roots
from autotune.probe.render import format_probe

__all__ = ["ProbeResult", "format_probe", "probe", "probe_roots"]
