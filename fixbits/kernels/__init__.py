"""The bit-exact Triton GEMM family: one module per algorithm family, each realising any
GEMMDesc of its family (fixbits/desc.py is the contract), with fused epilogues.

    single_pass.py      one chain over all of K per output tile (fast accumulation)
    per_mma.py          promotion every promotion_interval instructions (use_fast_accum false)
    splitk.py           level-0 contiguous parts in separate programs + an ordered merge kernel
    splitk_per_mma.py   split-K with per-MMA accumulation inside each part
    gemv_contiguous.py  scalar fma chains over contiguous slices (and the plain scalar chain)
    chained_chunks.py   scalar chains cut twice, every merge an in-order chain
    gemv_lane_tree.py   scalar lanes folded by a butterfly (offsets counting up or down)
    gemv_workspace.py   a scalar nest with its level-0 parts in separate programs
    epilogue.py         fused epilogue ops, computed as eager PyTorch computes them
    dispatch.py         GEMMDesc -> family kernel (pure Python)
    matmul.py           fixbits.matmul: cuBLASLt heuristic -> arch profile -> kernel
    backend.py          TritonBackend: the GemmBackend Protocol for one descriptor

Tile sizes, warps, stages, GROUP_M, TMA and persistence are speed knobs
(matrices/kernels/*.yaml); none of them may change a byte. Importing this package imports
neither torch nor triton; the family modules do.
"""
