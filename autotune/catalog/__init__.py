"""Built-in catalog: model specs (HF config.json copies + architecture adapters) and hardware presets."""

from autotune.catalog.models import list_models, load_model
from autotune.catalog.presets import list_presets, load_preset

__all__ = ["list_models", "load_model", "list_presets", "load_preset"]
