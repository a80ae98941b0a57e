"""Study storages and the run directory's own files.

Run directory layout (every path stored in it is RELATIVE to the run directory, so a moved or copied run
directory keeps working; `mi-tune report RUN_DIR` and a resumed search read only these files):

    RUN_DIR/
      manifest.yaml   written by `mi-tune search` before the first trial:
                        format: 1
                        run_id: <hex>            this run's id; its trials carry user attr "run" = run_id
                        study: <name>            study name inside the storage
                        storage: study.journal   relative path when the storage is a file inside RUN_DIR,
                                                 else the URL as given (sqlite:///abs, postgresql://..., journal:...)
                        trials: <N>              trials this run was asked for (its own, not the study's)
                        seed, model, preset/hardware, space: the search's inputs (to resume it)
                        resume: [mi-tune, search, ...]   the exact argv that resumes this run
                        elapsed_s: <float>       search time so far (summed over resumed sessions)
      study.journal   the default study storage (Optuna JournalFileBackend; safe for several processes)
      hardware.yaml   the box searched
      best.yaml, report.md, report.html, summary.json, trials.csv, plots/   outputs (report: autotune/report)

Each trial's user attrs: "plan" (plan dict or None), "reason" (why infeasible, or ''), "prediction" (the
Prediction dict as predicted when the trial ran: a report shows it without predicting again) and "run".

Storage URLs accepted by `--storage`: sqlite:///PATH, journal:PATH or a path ending in .log/.journal
(JournalFileBackend), postgresql://... (psycopg 3, `pip install 'psycopg[binary]'`). A relative file path
is relative to the current directory when given on the command line and to RUN_DIR in manifest.yaml.
"""
