"""Discrete-event serving simulator: request traces from a workload (trace.py), and one deployment serving them
with the performance model's step costs (engine.py)."""
