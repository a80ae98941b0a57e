"""Search: the space (search_spaces/*.yaml), plan sampling, the Optuna study and the engine baseline."""

from autotune.search.baseline import baseline_plan
from autotune.search.evaluate import evaluate
from autotune.search.space import Space, load_space
from autotune.search.study import SearchRequest, SearchResult, TrialRecord, run_study

__all__ = [
    "SearchRequest",
    "SearchResult",
    "Space",
    "TrialRecord",
    "baseline_plan",
    "evaluate",
    "load_space",
    "run_study",
]
