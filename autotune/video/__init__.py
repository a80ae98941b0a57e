"""Video generation (diffusion transformers) served by SGLang Diffusion: catalog, workload, DiT step model,
capability rules, plan search, launch and report. Self-contained: it reuses the LLM path's hardware profile,
rates table (perf/rates.py), collectives on the link matrix (perf/comm.py), rule machinery (capability/rules.py),
flag-table checks (engines/flags.py) and launch supervisor, and adds nothing to them.

Layer order inside: catalog < workload < rules < perf < search < emit < report < api.
"""

from autotune.video.catalog import VIDEO_CATALOG, is_video_model, load_video_model

__all__ = ["VIDEO_CATALOG", "is_video_model", "load_video_model"]
