"""The run directory's layout, stated once: the names of the files and folders `mi-tune search` writes and
`serve`, `measure`, `report`, `kernels tune-moe` and the video branch read back (join them to the run directory)."""

from __future__ import annotations

BEST = "best.yaml"  # the chosen plan, its model, box, workload, prediction and launch (`mi-tune serve` reads it)
BEST_PREDICTED = "best-predicted.yaml"  # the search's own best.yaml, kept when `measure --apply` replaces it
BEST_MEASURED = "best-measured.yaml"  # the best measured plan (`mi-tune measure`)
HARDWARE = "hardware.yaml"  # the box the search planned with
HARDWARE_MEASURED = "hardware-measured.yaml"  # that box with the corrections `measure` fitted
MODEL = "model.json"  # the model spec the search planned with
TRIALS = "trials.csv"
PARETO = "pareto.csv"
ALTERNATIVES = "alternatives.csv"
SUMMARY = "summary.json"
REPORT_MD = "report.md"
REPORT_HTML = "report.html"
MANIFEST = "manifest.yaml"  # which search the study is (search/storage.py)
STUDY_JOURNAL = "study.journal"  # the default study storage
MEASURED_CSV = "measured.csv"  # measured against predicted, one row per plan `measure` ran
RERANKED_CSV = "reranked.csv"  # the study's plans re-predicted with `measure`'s corrections

PLOTS = "plots"
MEASURE = "measure"  # one folder per measured plan
MOE_CONFIGS = "moe_configs"  # tune-moe's fused-MoE config files, where `serve` points the engines
FOLDERS = (PLOTS, MEASURE, MOE_CONFIGS)  # the folders a run directory may hold
