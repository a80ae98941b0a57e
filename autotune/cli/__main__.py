"""`python -m autotune.cli ...`: the same as the `mi-tune` console script."""

from autotune.cli import main

main()
