"""Device wrapper: the GEMM benchmark (benchmarks/gemm/bench.py) with the runner conventions.

PYTHONPATH=<repo> python3 runners/device/kernels_bench.py --out DIR [--budget-s 360] [--per-cell 3]

Every option of bench.py passes through (--per-cell, --tune-limit, --tune-s, --rep-ms,
--graph-rep-ms, --fused-share, --no-compile, --dry-run); the results are rewritten after every
shape (gemm_bench.csv/.md, tuned_configs.json), so a cut run leaves what it measured.
"""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

if __name__ == "__main__":
    repo = Path(__file__).resolve().parents[2]
    sys.path.insert(0, str(repo))
    sys.argv = [str(repo / "benchmarks" / "gemm" / "bench.py"), *sys.argv[1:]]
    runpy.run_path(sys.argv[0], run_name="__main__")
