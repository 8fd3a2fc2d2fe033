"""A small cuBLASLt binding: the heuristic's answer for a shape, and matmul with the library's
own pick or with a chosen algorithm.

Two ways in, behind one interface (``_Api``): ``nvmath.bindings.cublasLt`` where it is installed
(the library it loads is whichever the process already has, normally torch's), and a thin ctypes
layer over one named file, used when a specific library must be driven (two versions side by
side, or no nvmath). Every status is checked and raised as ``CublasLtError`` naming the call.

Layout: fixbits arrays are row-major. Row-major C = A·B is the column-major call
C^T = B^T·A^T, so cuBLAS's "A" operand is our B and its "m" is our N (FINDINGS.md). fp8 on
Hopper only runs the TN form, so there cuBLAS's "A" is B^T stored K-contiguous (op T).
Torch is imported inside functions only.
"""

from __future__ import annotations

import ctypes
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from fixbits.cublas import enums as E

if TYPE_CHECKING:
    import torch

DEFAULT_WORKSPACE_BYTES = 32 * 1024 * 1024
IN_DTYPES = ("fp16", "bf16", "fp8_e4m3")
OUT_DTYPES: dict[str, tuple[str, ...]] = {
    "fp16": ("fp32", "fp16"),
    "bf16": ("fp32", "bf16"),
    "fp8_e4m3": ("fp32", "fp16", "bf16"),
}
_HEURISTIC_RESULT_BYTES = 96  # cublasLtMatmulHeuristicResult_t: algo[64] ws u64, state i32, waves f32, i32[4]
_ALGO_BYTES = 64


class CublasLtError(RuntimeError):
    """A cuBLASLt call returned a status other than success."""

    def __init__(self, call: str, status: int, detail: str = "") -> None:
        self.call = call
        self.status = status
        name = E.STATUS_NAMES.get(status, f"status {status}")
        super().__init__(f"{call} failed: {name} ({status}){': ' + detail if detail else ''}")


class NoAlgorithmError(CublasLtError):
    """The heuristic returned no algorithm for this problem."""


def check_dtypes(in_dtype: str, out_dtype: str) -> None:
    if in_dtype not in IN_DTYPES:
        raise ValueError(f"in_dtype={in_dtype!r} is not supported; supported: {', '.join(IN_DTYPES)}")
    if out_dtype not in OUT_DTYPES[in_dtype]:
        raise ValueError(
            f"out_dtype={out_dtype!r} is not supported with in_dtype={in_dtype}; "
            f"supported: {', '.join(OUT_DTYPES[in_dtype])}"
        )


@dataclass(frozen=True)
class HeuristicAnswer:
    """cuBLASLt's first heuristic answer for one problem: the algo config attributes 0..6.

    ``algo_bytes`` is the opaque cublasLtMatmulAlgo_t to hand back to matmul; it is not part
    of equality or of ``key()`` (arch profiles key on the attributes only).
    """

    algo_id: int
    tile_id: int
    splitk_num: int
    reduction_scheme: int
    cta_swizzling: int
    custom_option: int
    stages_id: int
    workspace_size: int
    waves_count: float = field(default=0.0, compare=False)
    algo_bytes: bytes = field(default=b"", compare=False, repr=False)

    KEY_FIELDS = (
        "algo_id",
        "tile_id",
        "splitk_num",
        "reduction_scheme",
        "cta_swizzling",
        "custom_option",
        "stages_id",
    )

    def key(self) -> tuple[int, ...]:
        return tuple(int(getattr(self, f)) for f in self.KEY_FIELDS)

    def key_str(self) -> str:
        return "a{}-t{}-s{}-r{}-w{}-c{}-g{}".format(*self.key())

    def to_dict(self) -> dict[str, int]:
        d = {f: int(getattr(self, f)) for f in self.KEY_FIELDS}
        d["workspace_size"] = int(self.workspace_size)
        return d

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, where: str = "heuristic") -> HeuristicAnswer:
        missing = [f for f in cls.KEY_FIELDS if f not in data]
        if missing:
            raise ValueError(f"{where}: missing key(s) {', '.join(missing)}")
        v = [int(data[f]) for f in cls.KEY_FIELDS]
        return cls(v[0], v[1], v[2], v[3], v[4], v[5], v[6], int(data.get("workspace_size", 0)))


def parse_heuristic_result(raw: bytes, config: dict[str, int]) -> HeuristicAnswer:
    """Build an answer from one raw heuristic result struct and its config attributes."""
    ws = int(np.frombuffer(raw, dtype=np.uint64, count=1, offset=64)[0])
    waves = float(np.frombuffer(raw, dtype=np.float32, count=1, offset=76)[0])
    return HeuristicAnswer(
        algo_id=config["algo_id"],
        tile_id=config["tile_id"],
        splitk_num=config["splitk_num"],
        reduction_scheme=config["reduction_scheme"],
        cta_swizzling=config["cta_swizzling"],
        custom_option=config["custom_option"],
        stages_id=config["stages_id"],
        workspace_size=ws,
        waves_count=waves,
        algo_bytes=bytes(raw[:_ALGO_BYTES]),
    )


# --------------------------------------------------------------------------------------------
# The two ways in. Both expose the nvmath function names with pointer arguments as ints.


class _NvmathApi:
    def __init__(self) -> None:
        from nvmath.bindings import cublasLt  # noqa: PLC0415  (GPU machines only)

        self._m = cublasLt
        self.kind = "nvmath"
        self.path: str | None = None

    def __getattr__(self, name: str) -> Any:
        fn = getattr(self._m, name)

        def call(*args: Any) -> Any:
            try:
                return fn(*args)
            except self._m.cuBLASLtError as exc:
                status = int(getattr(exc, "status", -1))
                cls = (
                    NoAlgorithmError
                    if name == "matmul_algo_get_heuristic" and status == 15
                    else CublasLtError
                )
                raise cls(f"cublasLt.{name}", status, str(exc)) from exc

        setattr(self, name, call)  # built once per name: a heuristic scan makes many calls
        return call


class _CtypesApi:
    """The same calls over one library file loaded privately (RTLD_LOCAL)."""

    _SIGS: dict[str, list[Any]] = {
        "cublasLtCreate": [ctypes.c_void_p],
        "cublasLtDestroy": [ctypes.c_void_p],
        "cublasLtMatrixLayoutCreate": [
            ctypes.c_void_p,
            ctypes.c_int,
            ctypes.c_uint64,
            ctypes.c_uint64,
            ctypes.c_int64,
        ],
        "cublasLtMatrixLayoutDestroy": [ctypes.c_void_p],
        "cublasLtMatrixLayoutSetAttribute": [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t],
        "cublasLtMatmulDescCreate": [ctypes.c_void_p, ctypes.c_int, ctypes.c_int],
        "cublasLtMatmulDescDestroy": [ctypes.c_void_p],
        "cublasLtMatmulDescSetAttribute": [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t],
        "cublasLtMatmulPreferenceCreate": [ctypes.c_void_p],
        "cublasLtMatmulPreferenceDestroy": [ctypes.c_void_p],
        "cublasLtMatmulPreferenceSetAttribute": [
            ctypes.c_void_p,
            ctypes.c_int,
            ctypes.c_void_p,
            ctypes.c_size_t,
        ],
        "cublasLtMatmulAlgoGetHeuristic": [ctypes.c_void_p] * 7
        + [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p],
        "cublasLtMatmulAlgoConfigGetAttribute": [
            ctypes.c_void_p,
            ctypes.c_int,
            ctypes.c_void_p,
            ctypes.c_size_t,
            ctypes.c_void_p,
        ],
        "cublasLtMatmul": [ctypes.c_void_p] * 14 + [ctypes.c_size_t, ctypes.c_void_p],
    }

    def __init__(self, path: str) -> None:
        self._lib = ctypes.CDLL(path, mode=getattr(os, "RTLD_LOCAL", 0))
        self.kind = "ctypes"
        self.path = path
        for name, argtypes in self._SIGS.items():
            fn = getattr(self._lib, name)
            fn.argtypes = argtypes
            fn.restype = ctypes.c_int
        self._lib.cublasLtGetVersion.restype = ctypes.c_size_t
        self._lib.cublasLtGetVersion.argtypes = []

    def _check(self, call: str, status: int) -> None:
        if status != 0:
            cls = (
                NoAlgorithmError
                if call == "cublasLtMatmulAlgoGetHeuristic" and status == 15
                else CublasLtError
            )
            raise cls(call, status)

    def _create(self, call: str, *args: Any) -> int:
        out = ctypes.c_void_p()
        self._check(call, getattr(self._lib, call)(ctypes.byref(out), *args))
        return int(out.value or 0)

    def _do(self, call: str, *args: Any) -> None:
        self._check(call, getattr(self._lib, call)(*args))

    def get_version(self) -> int:
        return int(self._lib.cublasLtGetVersion())

    def create(self) -> int:
        return self._create("cublasLtCreate")

    def destroy(self, h: int) -> None:
        self._do("cublasLtDestroy", h)

    def matrix_layout_create(self, dtype: int, rows: int, cols: int, ld: int) -> int:
        return self._create("cublasLtMatrixLayoutCreate", dtype, rows, cols, ld)

    def matrix_layout_destroy(self, x: int) -> None:
        self._do("cublasLtMatrixLayoutDestroy", x)

    def matrix_layout_set_attribute(self, x: int, attr: int, buf: int, size: int) -> None:
        self._do("cublasLtMatrixLayoutSetAttribute", x, attr, buf, size)

    def matmul_desc_create(self, compute: int, scale: int) -> int:
        return self._create("cublasLtMatmulDescCreate", compute, scale)

    def matmul_desc_destroy(self, x: int) -> None:
        self._do("cublasLtMatmulDescDestroy", x)

    def matmul_desc_set_attribute(self, x: int, attr: int, buf: int, size: int) -> None:
        self._do("cublasLtMatmulDescSetAttribute", x, attr, buf, size)

    def matmul_preference_create(self) -> int:
        return self._create("cublasLtMatmulPreferenceCreate")

    def matmul_preference_destroy(self, x: int) -> None:
        self._do("cublasLtMatmulPreferenceDestroy", x)

    def matmul_preference_set_attribute(self, x: int, attr: int, buf: int, size: int) -> None:
        self._do("cublasLtMatmulPreferenceSetAttribute", x, attr, buf, size)

    def matmul_algo_get_heuristic(self, h, desc, a, b, c, d, pref, count, results, nret) -> None:  # type: ignore[no-untyped-def]
        self._do("cublasLtMatmulAlgoGetHeuristic", h, desc, a, b, c, d, pref, count, results, nret)

    def matmul_algo_config_get_attribute(
        self, algo: int, attr: int, buf: int, size: int, written: int
    ) -> None:
        self._do("cublasLtMatmulAlgoConfigGetAttribute", algo, attr, buf, size, written)

    def matmul(self, *args: Any) -> None:
        self._do("cublasLtMatmul", *args)


def loaded_cublaslt_paths() -> tuple[str, ...]:
    """The libcublasLt files mapped into this process (Linux), e.g. the one torch loaded."""
    try:
        with open("/proc/self/maps") as fh:
            paths = {line.split()[-1] for line in fh if "libcublasLt" in line and "/" in line}
    except OSError:
        return ()
    return tuple(sorted(paths))


# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Problem:
    """The column-major cuBLAS problem for row-major (M,K)·(K,N): see the module docstring."""

    m: int
    n: int
    k: int
    in_dtype: str
    out_dtype: str

    @property
    def transposed_a(self) -> bool:  # cuBLAS's A (our B) read with op T: the fp8 TN form
        return self.in_dtype.startswith("fp8")

    def layouts(self) -> tuple[tuple[int, int, int], tuple[int, int, int], tuple[int, int, int]]:
        """(rows, cols, ld) of cuBLAS's A (our B), B (our A) and C/D (our C), column-major."""
        a = (self.k, self.n, self.k) if self.transposed_a else (self.n, self.k, self.n)
        b = (self.k, self.m, self.k)
        c = (self.n, self.m, self.n)
        return a, b, c


class CublasLt:
    """One cuBLASLt handle; ``library`` picks a file (ctypes), default nvmath (else torch's file)."""

    def __init__(
        self, library: str | Any | None = None, *, prefer_nvmath: bool = True, api: Any = None
    ) -> None:
        """``api`` injects an object with the nvmath call names (a unit test's fake library)."""
        path = getattr(library, "path", library)
        if api is not None:
            self._init(api)
            return
        try:  # load torch's libcublasLt first, so nvmath and torch share one copy of the library
            import torch

            if torch.cuda.is_available():
                torch.cuda.init()
        except ImportError:
            pass
        chosen: Any = None
        if path is None and prefer_nvmath:
            try:
                chosen = _NvmathApi()
            except ImportError:
                chosen = None
        if chosen is None:
            if path is None:
                path = self._default_path()
            chosen = _CtypesApi(str(path))
        self._init(chosen)

    def _init(self, api: Any) -> None:
        self._api = api
        self.handle = api.create()
        self.version = int(api.get_version())
        self.library_path = api.path or next(iter(loaded_cublaslt_paths()), None)
        self.api_kind = api.kind
        self._descs: dict[tuple[str, str], int] = {}
        self._prefs: dict[int, int] = {}
        self._layouts: dict[tuple[str, str], tuple[int, int, int, int]] = {}

    @staticmethod
    def _default_path() -> str:
        loaded = loaded_cublaslt_paths()
        if loaded:
            return loaded[0]
        from fixbits.cublas.lib import discover, distinct_versions

        libs = distinct_versions(discover())
        if not libs:
            raise FileNotFoundError("no usable libcublasLt found (fixbits.cublas.lib.discover() is empty)")
        return libs[0].path

    # -- lifetime ---------------------------------------------------------------------------
    def close(self) -> None:
        api = self._api
        for lay in self._layouts.values():
            for x in lay:
                api.matrix_layout_destroy(x)
        for d in self._descs.values():
            api.matmul_desc_destroy(d)
        for p in self._prefs.values():
            api.matmul_preference_destroy(p)
        self._layouts.clear()
        self._descs.clear()
        self._prefs.clear()
        if self.handle:
            api.destroy(self.handle)
            self.handle = 0

    def __enter__(self) -> CublasLt:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def version_str(self) -> str:
        from fixbits.cublas.lib import version_string

        return version_string(self.version)

    # -- descriptors ------------------------------------------------------------------------
    def _set(self, setter: Any, obj: int, attr: int, value: Any, dtype: Any) -> None:
        buf = np.array([value], dtype=dtype)
        setter(obj, attr, buf.ctypes.data, buf.nbytes)

    def _desc(self, p: _Problem) -> int:
        key = (p.in_dtype, p.out_dtype)
        if key not in self._descs:
            d = self._api.matmul_desc_create(E.CUBLAS_COMPUTE_32F, E.CUDA_R_32F)
            set_attr = self._api.matmul_desc_set_attribute
            self._set(
                set_attr,
                d,
                E.MATMUL_DESC_TRANSA,
                E.CUBLAS_OP_T if p.transposed_a else E.CUBLAS_OP_N,
                np.int32,
            )
            self._set(set_attr, d, E.MATMUL_DESC_TRANSB, E.CUBLAS_OP_N, np.int32)
            self._descs[key] = d
        return self._descs[key]

    def _pref(self, workspace_bytes: int) -> int:
        if workspace_bytes not in self._prefs:
            p = self._api.matmul_preference_create()
            self._set(
                self._api.matmul_preference_set_attribute,
                p,
                E.PREF_MAX_WORKSPACE_BYTES,
                workspace_bytes,
                np.uint64,
            )
            self._prefs[workspace_bytes] = p
        return self._prefs[workspace_bytes]

    def _layouts_for(self, p: _Problem) -> tuple[int, int, int, int]:
        """Layouts are created once per dtype pair and re-dimensioned per shape (a scan is cheap)."""
        key = (p.in_dtype, p.out_dtype)
        if key not in self._layouts:
            cin, cout = E.DTYPE_CODES[p.in_dtype], E.DTYPE_CODES[p.out_dtype]
            self._layouts[key] = (
                self._api.matrix_layout_create(cin, 1, 1, 1),
                self._api.matrix_layout_create(cin, 1, 1, 1),
                self._api.matrix_layout_create(cout, 1, 1, 1),
                self._api.matrix_layout_create(cout, 1, 1, 1),
            )
        lays = self._layouts[key]
        a, b, c = p.layouts()
        set_attr = self._api.matrix_layout_set_attribute
        for lay, (rows, cols, ld) in zip(lays, (a, b, c, c), strict=True):
            self._set(set_attr, lay, E.LAYOUT_ROWS, rows, np.uint64)
            self._set(set_attr, lay, E.LAYOUT_COLS, cols, np.uint64)
            self._set(set_attr, lay, E.LAYOUT_LD, ld, np.int64)
        return lays

    def _read_config(self, algo_ptr: int) -> dict[str, int]:
        out: dict[str, int] = {}
        buf = np.zeros(1, dtype=np.int32)
        written = np.zeros(1, dtype=np.uint64)
        for name, attr in (
            ("algo_id", E.ALGO_CONFIG_ID),
            ("tile_id", E.ALGO_CONFIG_TILE_ID),
            ("splitk_num", E.ALGO_CONFIG_SPLITK_NUM),
            ("reduction_scheme", E.ALGO_CONFIG_REDUCTION_SCHEME),
            ("cta_swizzling", E.ALGO_CONFIG_CTA_SWIZZLING),
            ("custom_option", E.ALGO_CONFIG_CUSTOM_OPTION),
            ("stages_id", E.ALGO_CONFIG_STAGES_ID),
        ):
            buf[0] = 0
            self._api.matmul_algo_config_get_attribute(
                algo_ptr, attr, buf.ctypes.data, 4, written.ctypes.data
            )
            out[name] = int(buf[0])
        return out

    # -- public ------------------------------------------------------------------------------
    def heuristic(
        self,
        m: int,
        n: int,
        k: int,
        in_dtype: str = "fp16",
        out_dtype: str = "fp32",
        *,
        workspace_bytes: int = DEFAULT_WORKSPACE_BYTES,
    ) -> HeuristicAnswer:
        """The library's first answer for row-major (m,k)·(k,n); host-only, no kernel runs."""
        return self.heuristics(m, n, k, in_dtype, out_dtype, workspace_bytes=workspace_bytes, count=1)[0]

    def heuristics(
        self,
        m: int,
        n: int,
        k: int,
        in_dtype: str = "fp16",
        out_dtype: str = "fp32",
        *,
        workspace_bytes: int = DEFAULT_WORKSPACE_BYTES,
        count: int = 8,
    ) -> list[HeuristicAnswer]:
        check_dtypes(in_dtype, out_dtype)
        for name, v in (("m", m), ("n", n), ("k", k)):
            if not isinstance(v, int) or v < 1:
                raise ValueError(f"{name}={v!r} must be a positive integer")
        p = _Problem(m, n, k, in_dtype, out_dtype)
        desc = self._desc(p)
        a, b, c, d = self._layouts_for(p)
        results = np.zeros(_HEURISTIC_RESULT_BYTES * count, dtype=np.uint8)
        nret = np.zeros(1, dtype=np.int32)
        self._api.matmul_algo_get_heuristic(
            self.handle,
            desc,
            a,
            b,
            c,
            d,
            self._pref(workspace_bytes),
            count,
            results.ctypes.data,
            nret.ctypes.data,
        )
        if int(nret[0]) < 1:
            raise NoAlgorithmError(
                "cublasLtMatmulAlgoGetHeuristic", 15, f"no algorithm for {m}x{n}x{k} {in_dtype}->{out_dtype}"
            )
        answers = []
        for i in range(int(nret[0])):
            raw = results[i * _HEURISTIC_RESULT_BYTES : (i + 1) * _HEURISTIC_RESULT_BYTES]
            state = int(np.frombuffer(raw.tobytes(), dtype=np.int32, count=1, offset=72)[0])
            if state != 0:
                continue
            config = self._read_config(raw.ctypes.data)
            answers.append(parse_heuristic_result(raw.tobytes(), config))
        if not answers:
            raise NoAlgorithmError(
                "cublasLtMatmulAlgoGetHeuristic", 15, "every returned algorithm has a failed state"
            )
        return answers

    def matmul(
        self,
        a: torch.Tensor,
        b: torch.Tensor,
        out_dtype: str = "fp32",
        *,
        algo: HeuristicAnswer | None = None,
        workspace_bytes: int = DEFAULT_WORKSPACE_BYTES,
        fast_accum: bool | None = None,
    ) -> torch.Tensor:
        """Row-major C = A·B on the current stream; ``algo=None`` lets the library pick (algo NULL)."""
        import torch

        from fixbits.cublas.torch_dtypes import fixbits_name, torch_dtype

        if a.dim() != 2 or b.dim() != 2 or a.shape[1] != b.shape[0]:
            raise ValueError(f"shapes {tuple(a.shape)} and {tuple(b.shape)} do not multiply as (M,K)·(K,N)")
        if a.dtype != b.dtype:
            raise ValueError(f"A and B must share a dtype, got {a.dtype} and {b.dtype}")
        if not a.is_cuda or not b.is_cuda:
            raise ValueError("A and B must be CUDA tensors")
        in_dtype = fixbits_name(a.dtype)
        check_dtypes(in_dtype, out_dtype)
        m, k = a.shape
        n = b.shape[1]
        p = _Problem(int(m), int(n), int(k), in_dtype, out_dtype)
        if p.transposed_a and k % 16:
            raise ValueError(f"fp8 needs K a multiple of 16 (16-byte rows), got K={k}")
        a_c = a.contiguous()
        b_c = b.t().contiguous() if p.transposed_a else b.contiguous()  # fp8: B stored K-contiguous
        c = torch.empty((m, n), dtype=torch_dtype(out_dtype), device=a.device)
        desc = self._desc(p)
        keep: list[Any] = []
        if p.transposed_a:
            one = torch.ones(1, dtype=torch.float32, device=a.device)
            keep.append(one)
            set_attr = self._api.matmul_desc_set_attribute
            self._set(set_attr, desc, E.MATMUL_DESC_A_SCALE_POINTER, one.data_ptr(), np.uintp)
            self._set(set_attr, desc, E.MATMUL_DESC_B_SCALE_POINTER, one.data_ptr(), np.uintp)
            if fast_accum is not None:
                self._set(set_attr, desc, E.MATMUL_DESC_FAST_ACCUM, int(fast_accum), np.int8)
        elif fast_accum is not None:
            raise ValueError("fast_accum applies to fp8 inputs only")
        la, lb, lc, ld = self._layouts_for(p)
        alpha = np.ones(1, dtype=np.float32)
        beta = np.zeros(1, dtype=np.float32)
        ws = torch.empty(workspace_bytes, dtype=torch.uint8, device=a.device) if workspace_bytes else None
        algo_buf = None
        if algo is not None:
            if len(algo.algo_bytes) != _ALGO_BYTES:
                raise ValueError("algo carries no algorithm bytes: pass an answer returned by heuristic()")
            algo_buf = np.frombuffer(algo.algo_bytes, dtype=np.uint8).copy()
        stream = torch.cuda.current_stream(a.device).cuda_stream
        self._api.matmul(
            self.handle,
            desc,
            alpha.ctypes.data,
            b_c.data_ptr(),
            la,
            a_c.data_ptr(),
            lb,
            beta.ctypes.data,
            c.data_ptr(),
            lc,
            c.data_ptr(),
            ld,
            0 if algo_buf is None else algo_buf.ctypes.data,
            0 if ws is None else ws.data_ptr(),
            workspace_bytes if ws is not None else 0,
            stream,
        )
        # keep workspace and scales alive until the kernel has run
        torch.cuda.current_stream(a.device).synchronize()
        del keep, ws
        return c
