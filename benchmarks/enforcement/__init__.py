"""Speed benchmark of pinned inner-tree reductions against free order (runners/device/enforcement_bench.py)."""
