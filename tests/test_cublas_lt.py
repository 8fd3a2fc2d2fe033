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


# --- the binding's plumbing against a fake library (pointers, buffers, attribute values) ------

import ctypes  # noqa: E402


class FakeLt:
    """Stands in for libcublasLt: keeps what was set, answers the heuristic from the layouts."""

    kind = "fake"
    path = "/fake/libcublasLt.so.13"

    def __init__(self) -> None:
        self.next = 100
        self.attrs: dict[int, dict[int, int]] = {}
        self.dtypes: dict[int, int] = {}
        self.matmuls: list[tuple[int, ...]] = []

    def _new(self) -> int:
        self.next += 1
        self.attrs[self.next] = {}
        return self.next

    def create(self) -> int:
        return self._new()

    def get_version(self) -> int:
        return 130100

    def destroy(self, h: int) -> None: ...

    def matrix_layout_create(self, dtype: int, rows: int, cols: int, ld: int) -> int:
        x = self._new()
        self.dtypes[x] = dtype
        return x

    def matmul_desc_create(self, compute: int, scale: int) -> int:
        assert (compute, scale) == (E.CUBLAS_COMPUTE_32F, E.CUDA_R_32F)
        return self._new()

    def matmul_preference_create(self) -> int:
        return self._new()

    def _store(self, x: int, attr: int, buf: int, size: int) -> None:
        self.attrs[x][attr] = int.from_bytes(ctypes.string_at(buf, size), "little", signed=True)

    matrix_layout_set_attribute = matmul_desc_set_attribute = matmul_preference_set_attribute = _store

    def matrix_layout_destroy(self, x: int) -> None: ...

    matmul_desc_destroy = matmul_preference_destroy = matrix_layout_destroy

    def matmul_algo_get_heuristic(self, h, desc, a, b, c, d, pref, count, results, nret) -> None:  # type: ignore[no-untyped-def]
        k = (
            self.attrs[a][E.LAYOUT_COLS]
            if self.attrs[desc][E.MATMUL_DESC_TRANSA] == E.CUBLAS_OP_N
            else self.attrs[a][E.LAYOUT_ROWS]
        )
        ws = self.attrs[pref][E.PREF_MAX_WORKSPACE_BYTES]
        n_ans = min(count, 2)
        for i in range(n_ans):
            raw = np.zeros(24, dtype=np.int32)
            raw[:7] = [66 + i, 10, max(1, k // 1280) if ws else 1, 2, 0, 0, 17]
            raw[16:18] = np.array([ws // 2], dtype=np.uint64).view(np.int32)
            ctypes.memmove(results + 96 * i, raw.ctypes.data, 96)
        ctypes.memmove(nret, np.array([n_ans], dtype=np.int32).ctypes.data, 4)

    def matmul_algo_config_get_attribute(
        self, algo: int, attr: int, buf: int, size: int, written: int
    ) -> None:
        assert size == 4
        ctypes.memmove(buf, algo + 4 * attr, 4)


@pytest.fixture
def fake_lt():  # type: ignore[no-untyped-def]
    from fixbits.cublas.lt import CublasLt

    fake = FakeLt()
    lt = CublasLt(api=fake)
    yield lt, fake
    lt.close()


def test_heuristic_plumbing(fake_lt) -> None:  # type: ignore[no-untyped-def]
    lt, fake = fake_lt
    assert lt.version_str == "13.1.0" and lt.library_path == FakeLt.path
    ans = lt.heuristic(32, 32, 11528, "fp16", "fp32")
    assert ans.key() == (66, 10, 9, 2, 0, 0, 17) and ans.workspace_size == (32 << 20) // 2
    assert len(ans.algo_bytes) == 64
    # layouts were re-dimensioned for this shape: cuBLAS A = our B (N x K, ld N), B = our A, C = N x M
    (a, b, c, d) = lt._layouts[("fp16", "fp32")]
    dims = [
        (fake.attrs[x][E.LAYOUT_ROWS], fake.attrs[x][E.LAYOUT_COLS], fake.attrs[x][E.LAYOUT_LD])
        for x in (a, b, c, d)
    ]
    assert dims == [(32, 11528, 32), (11528, 32, 11528), (32, 32, 32), (32, 32, 32)]
    assert [fake.dtypes[x] for x in (a, b, c, d)] == [E.CUDA_R_16F, E.CUDA_R_16F, E.CUDA_R_32F, E.CUDA_R_32F]
    # a second shape reuses the same layouts with new dimensions, and the answer follows them
    assert lt.heuristic(1, 8, 57608, "fp16", "fp32").splitk_num == 45
    assert lt._layouts[("fp16", "fp32")] == (a, b, c, d)
    assert lt.heuristic(1, 8, 57608, "fp16", "fp32", workspace_bytes=0).splitk_num == 1
    both = lt.heuristics(1, 8, 57608, "bf16", "bf16", count=4)
    assert [x.algo_id for x in both] == [66, 67]


def test_fp8_is_transposed_a(fake_lt) -> None:  # type: ignore[no-untyped-def]
    lt, fake = fake_lt
    ans = lt.heuristic(16, 64, 12800, "fp8_e4m3", "bf16")
    desc = lt._descs[("fp8_e4m3", "bf16")]
    assert (
        fake.attrs[desc][E.MATMUL_DESC_TRANSA] == E.CUBLAS_OP_T
        and fake.attrs[desc][E.MATMUL_DESC_TRANSB] == E.CUBLAS_OP_N
    )
    assert ans.splitk_num == 10  # K read from the rows of the transposed A
    with pytest.raises(ValueError, match="m=0"):
        lt.heuristic(0, 8, 64)
