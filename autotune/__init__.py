"""mi-tune: measure the box, model the model on it, search the plans, hand over a launch."""

__version__ = "0.1.0"
