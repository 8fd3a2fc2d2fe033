"""CPU parts of the cuBLASLt binding: answers, dtype checks, the row-major mapping, errors."""

from __future__ import annotations

import numpy as np
import pytest

from fixbits.cublas import enums as E
from fixbits.cublas.lt import (
    CublasLtError,
    HeuristicAnswer,
    NoAlgorithmError,
    _Problem,
    check_dtypes,
    parse_heuristic_result,
)

pytestmark = pytest.mark.unit


def test_heuristic_answer_key_and_roundtrip() -> None:
    a = HeuristicAnswer(66, 10, 9, 2, 0, 0, 17, 4096, waves_count=0.1, algo_bytes=b"\x01" * 64)
    b = HeuristicAnswer(66, 10, 9, 2, 0, 0, 17, 4096)
    assert a == b and hash(a) == hash(b)  # the opaque algo bytes and waves are not identity
    assert a.key() == (66, 10, 9, 2, 0, 0, 17)
    assert a.key_str() == "a66-t10-s9-r2-w0-c0-g17"
    assert HeuristicAnswer.from_dict(a.to_dict()) == a
    with pytest.raises(ValueError, match="missing key"):
        HeuristicAnswer.from_dict({"algo_id": 66})


def test_parse_heuristic_result_layout() -> None:
    """cublasLtMatmulHeuristicResult_t: 64-byte algo, u64 workspace, i32 state, f32 waves, 4 x i32."""
    raw = bytearray(96)
    raw[:64] = bytes(range(64))
    raw[64:72] = np.array([33554432], dtype=np.uint64).tobytes()
    raw[76:80] = np.array([0.75], dtype=np.float32).tobytes()
    cfg = dict(
        algo_id=66,
        tile_id=13,
        splitk_num=9,
        reduction_scheme=2,
        cta_swizzling=0,
        custom_option=0,
        stages_id=3,
    )
    ans = parse_heuristic_result(bytes(raw), cfg)
    assert ans.workspace_size == 33554432 and ans.waves_count == 0.75
    assert ans.algo_bytes == bytes(range(64))
    assert ans.key() == (66, 13, 9, 2, 0, 0, 3)


@pytest.mark.parametrize(
    "inp,out,ok",
    [
        ("fp16", "fp32", True),
        ("fp16", "fp16", True),
        ("bf16", "bf16", True),
        ("bf16", "fp16", False),
        ("fp8_e4m3", "bf16", True),
        ("fp8_e4m3", "fp8_e4m3", False),
        ("fp32", "fp32", False),
        ("int8", "fp32", False),
    ],
)
def test_check_dtypes(inp: str, out: str, ok: bool) -> None:
    if ok:
        check_dtypes(inp, out)
    else:
        with pytest.raises(ValueError, match="supported"):
            check_dtypes(inp, out)


def test_row_major_mapping() -> None:
    """Row-major (M,K)·(K,N) is the column-major C^T = B^T·A^T: cuBLAS's A is our B (N rows)."""
    a, b, c = _Problem(3, 5, 7, "fp16", "fp32").layouts()
    assert a == (5, 7, 5)  # our B (K,N) row-major = column-major N x K, ld N
    assert b == (7, 3, 7)  # our A (M,K) row-major = column-major K x M, ld K
    assert c == (5, 3, 5)  # our C (M,N) row-major = column-major N x M, ld N
    a8, b8, c8 = _Problem(3, 32, 64, "fp8_e4m3", "fp32").layouts()
    assert a8 == (64, 32, 64)  # fp8 TN: B stored K-contiguous, read with op T
    assert (b8, c8) == ((64, 3, 64), (32, 3, 32))


def test_errors_name_call_and_status() -> None:
    e = CublasLtError("cublasLtMatmul", 7)
    assert "cublasLtMatmul" in str(e) and "CUBLAS_STATUS_INVALID_VALUE" in str(e) and e.status == 7
    assert "status 52" in str(CublasLtError("cublasLtCreate", 52))
    assert issubclass(NoAlgorithmError, CublasLtError)


def test_enum_table_is_complete() -> None:
    for const in E.NVMATH_NAMES:
        assert isinstance(getattr(E, const), int), const
    assert set(E.DTYPE_CODES) == set(E.ELEMENT_BYTES)
