"""cuBLASLt ABI constants used by the ctypes path (values of the C enums in cublasLt.h,
cublas_api.h and library_types.h).

They are part of the library's stable ABI; the nvmath path reads the same names from
``nvmath.bindings.cublasLt`` and ``tests/test_cublas_lt.py`` compares the two on a GPU
machine, so a wrong number here fails a test instead of silently setting the wrong attribute.
"""

from __future__ import annotations

# cudaDataType_t (library_types.h)
CUDA_R_32F = 0
CUDA_R_16F = 2
CUDA_R_16BF = 14
CUDA_R_8F_E4M3 = 28
CUDA_R_8F_E5M2 = 29

# cublasComputeType_t (cublas_api.h)
CUBLAS_COMPUTE_32F = 68

# cublasOperation_t
CUBLAS_OP_N = 0
CUBLAS_OP_T = 1

# cublasLtMatmulDescAttributes_t
MATMUL_DESC_COMPUTE_TYPE = 0
MATMUL_DESC_SCALE_TYPE = 1
MATMUL_DESC_POINTER_MODE = 2
MATMUL_DESC_TRANSA = 3
MATMUL_DESC_TRANSB = 4
MATMUL_DESC_A_SCALE_POINTER = 17
MATMUL_DESC_B_SCALE_POINTER = 18
MATMUL_DESC_C_SCALE_POINTER = 19
MATMUL_DESC_D_SCALE_POINTER = 20
MATMUL_DESC_FAST_ACCUM = 25

# cublasLtMatrixLayoutAttribute_t
LAYOUT_TYPE = 0
LAYOUT_ORDER = 1
LAYOUT_ROWS = 2
LAYOUT_COLS = 3
LAYOUT_LD = 4

# cublasLtMatmulPreferenceAttributes_t
PREF_SEARCH_MODE = 0
PREF_MAX_WORKSPACE_BYTES = 1

# cublasLtMatmulAlgoConfigAttributes_t: the heuristic answer's fields, in attribute order
ALGO_CONFIG_ID = 0
ALGO_CONFIG_TILE_ID = 1
ALGO_CONFIG_SPLITK_NUM = 2
ALGO_CONFIG_REDUCTION_SCHEME = 3
ALGO_CONFIG_CTA_SWIZZLING = 4
ALGO_CONFIG_CUSTOM_OPTION = 5
ALGO_CONFIG_STAGES_ID = 6

# nvmath-python enum member names for the constants above: (enum class, member) per constant.
NVMATH_NAMES: dict[str, tuple[str, str]] = {
    "MATMUL_DESC_COMPUTE_TYPE": ("MatmulDescAttribute", "COMPUTE_TYPE"),
    "MATMUL_DESC_SCALE_TYPE": ("MatmulDescAttribute", "SCALE_TYPE"),
    "MATMUL_DESC_POINTER_MODE": ("MatmulDescAttribute", "POINTER_MODE"),
    "MATMUL_DESC_TRANSA": ("MatmulDescAttribute", "TRANSA"),
    "MATMUL_DESC_TRANSB": ("MatmulDescAttribute", "TRANSB"),
    "MATMUL_DESC_A_SCALE_POINTER": ("MatmulDescAttribute", "A_SCALE_POINTER"),
    "MATMUL_DESC_B_SCALE_POINTER": ("MatmulDescAttribute", "B_SCALE_POINTER"),
    "MATMUL_DESC_C_SCALE_POINTER": ("MatmulDescAttribute", "C_SCALE_POINTER"),
    "MATMUL_DESC_D_SCALE_POINTER": ("MatmulDescAttribute", "D_SCALE_POINTER"),
    "MATMUL_DESC_FAST_ACCUM": ("MatmulDescAttribute", "FAST_ACCUM"),
    "LAYOUT_TYPE": ("MatrixLayoutAttribute", "TYPE"),
    "LAYOUT_ORDER": ("MatrixLayoutAttribute", "ORDER"),
    "LAYOUT_ROWS": ("MatrixLayoutAttribute", "ROWS"),
    "LAYOUT_COLS": ("MatrixLayoutAttribute", "COLS"),
    "LAYOUT_LD": ("MatrixLayoutAttribute", "LD"),
    "PREF_SEARCH_MODE": ("MatmulPreferenceAttribute", "SEARCH_MODE"),
    "PREF_MAX_WORKSPACE_BYTES": ("MatmulPreferenceAttribute", "MAX_WORKSPACE_BYTES"),
    "ALGO_CONFIG_ID": ("MatmulAlgoConfigAttribute", "ID"),
    "ALGO_CONFIG_TILE_ID": ("MatmulAlgoConfigAttribute", "TILE_ID"),
    "ALGO_CONFIG_SPLITK_NUM": ("MatmulAlgoConfigAttribute", "SPLITK_NUM"),
    "ALGO_CONFIG_REDUCTION_SCHEME": ("MatmulAlgoConfigAttribute", "REDUCTION_SCHEME"),
    "ALGO_CONFIG_CTA_SWIZZLING": ("MatmulAlgoConfigAttribute", "CTA_SWIZZLING"),
    "ALGO_CONFIG_CUSTOM_OPTION": ("MatmulAlgoConfigAttribute", "CUSTOM_OPTION"),
    "ALGO_CONFIG_STAGES_ID": ("MatmulAlgoConfigAttribute", "STAGES_ID"),
}

# cublasStatus_t names, for error messages
STATUS_NAMES: dict[int, str] = {
    0: "CUBLAS_STATUS_SUCCESS",
    1: "CUBLAS_STATUS_NOT_INITIALIZED",
    3: "CUBLAS_STATUS_ALLOC_FAILED",
    7: "CUBLAS_STATUS_INVALID_VALUE",
    8: "CUBLAS_STATUS_ARCH_MISMATCH",
    11: "CUBLAS_STATUS_MAPPING_ERROR",
    13: "CUBLAS_STATUS_EXECUTION_FAILED",
    14: "CUBLAS_STATUS_INTERNAL_ERROR",
    15: "CUBLAS_STATUS_NOT_SUPPORTED",
    16: "CUBLAS_STATUS_LICENSE_ERROR",
}

# fixbits dtype name -> cudaDataType_t
DTYPE_CODES: dict[str, int] = {
    "fp32": CUDA_R_32F,
    "fp16": CUDA_R_16F,
    "bf16": CUDA_R_16BF,
    "fp8_e4m3": CUDA_R_8F_E4M3,
    "fp8_e5m2": CUDA_R_8F_E5M2,
}
ELEMENT_BYTES: dict[str, int] = {"fp32": 4, "fp16": 2, "bf16": 2, "fp8_e4m3": 1, "fp8_e5m2": 1}

# cublasLtMatmulStages_t (cublasLt.h): STAGES_ID -> (K depth of one stage, stages). IDs 1-24 run
# 16, 32, 64, 128 deep with 1-6 stages each; later IDs were appended out of that order. The nvjet
# kernels' IDs past these (e.g. 35) are not in the header this table follows: no depth is known.
STAGES: dict[int, tuple[int, int]] = {
    **{6 * i + s: (depth, s) for i, depth in enumerate((16, 32, 64, 128)) for s in range(1, 7)},
    25: (32, 10),
    26: (8, 4),
    27: (16, 10),
    28: (8, 5),
    29: (16, 80),
    30: (64, 80),
}


def stage_depth(stages_id: int) -> int | None:
    """The K depth one main-loop stage of this STAGES_ID loads, or None where the enum has none."""
    hit = STAGES.get(int(stages_id))
    return hit[0] if hit else None
