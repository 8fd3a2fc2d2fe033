"""Known cuBLAS defects: conditions, reproducers and sweeps (splitk_tail), and `fixbits bug` (cli)."""
