"""The ctypes path end to end against a fake libcublasLt compiled here (skipped without a C
compiler): symbols, argument types, out-parameters, status checks and discovery by version."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

FAKE_C = r"""
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
typedef struct { int64_t attrs[32]; int dtype; } obj;
static void *mk(void) { return calloc(1, sizeof(obj)); }
static int set(void *x, int attr, const void *buf, size_t size) {
    if (attr < 0 || attr >= 32 || size > 8) return 7;
    int64_t v = 0; memcpy(&v, buf, size); ((obj *)x)->attrs[attr] = v; return 0;
}
size_t cublasLtGetVersion(void) { return 130100; }
int cublasLtCreate(void **h) { *h = mk(); return 0; }
int cublasLtDestroy(void *h) { free(h); return 0; }
int cublasLtMatrixLayoutCreate(void **l, int type, uint64_t r, uint64_t c, int64_t ld) {
    obj *o = mk(); o->dtype = type; o->attrs[2] = r; o->attrs[3] = c; o->attrs[4] = ld; *l = o; return 0;
}
int cublasLtMatrixLayoutDestroy(void *l) { free(l); return 0; }
int cublasLtMatrixLayoutSetAttribute(void *l, int a, const void *b, size_t s) { return set(l, a, b, s); }
int cublasLtMatmulDescCreate(void **d, int compute, int scale) {
    if (compute != 68 || scale != 0) return 7; *d = mk(); return 0;
}
int cublasLtMatmulDescDestroy(void *d) { free(d); return 0; }
int cublasLtMatmulDescSetAttribute(void *d, int a, const void *b, size_t s) { return set(d, a, b, s); }
int cublasLtMatmulPreferenceCreate(void **p) { *p = mk(); return 0; }
int cublasLtMatmulPreferenceDestroy(void *p) { free(p); return 0; }
int cublasLtMatmulPreferenceSetAttribute(void *p, int a, const void *b, size_t s) { return set(p, a, b, s); }
int cublasLtMatmulAlgoGetHeuristic(void *h, void *desc, void *a, void *b, void *c, void *d, void *pref,
                                   int count, void *results, int *nret) {
    obj *D = desc, *A = a, *P = pref;
    int64_t k = D->attrs[3] == 0 ? A->attrs[3] : A->attrs[2];
    int64_t ws = P->attrs[1];
    if (k > 1000000) { *nret = 0; return 15; }
    int32_t algo[16] = {0};
    algo[0] = 66; algo[1] = 10; algo[2] = ws ? (k / 1280 > 1 ? (int32_t)(k / 1280) : 1) : 1; algo[3] = 2; algo[6] = 17;
    memset(results, 0, 96); memcpy(results, algo, 64);
    uint64_t w = (uint64_t)ws / 2; memcpy((char *)results + 64, &w, 8);
    *nret = 1; return 0;
}
int cublasLtMatmulAlgoConfigGetAttribute(const void *algo, int attr, void *buf, size_t size, size_t *written) {
    if (size != 4) return 7; memcpy(buf, (const char *)algo + 4 * attr, 4); if (written) *written = 4; return 0;
}
int cublasLtMatmul(void) { return 13; }
"""


@pytest.fixture(scope="module")
def fake_lib(tmp_path_factory: pytest.TempPathFactory) -> Path:
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler to build the fake libcublasLt")
    d = tmp_path_factory.mktemp("fakecublas") / "lib64"
    d.mkdir()
    src = d / "fake.c"
    src.write_text(FAKE_C)
    out = d / "libcublasLt.so.13"
    subprocess.run([cc, "-shared", "-fPIC", "-O1", "-o", str(out), str(src)], check=True, capture_output=True)
    return out


def test_discovery_reads_the_version(fake_lib: Path) -> None:
    from fixbits.cublas.lib import discover, distinct_versions

    (rec,) = [x for x in discover((str(fake_lib.parent),)) if x.path == str(fake_lib)]
    assert rec.usable and rec.version == 130100 and rec.version_str == "13.1.0"
    assert rec in distinct_versions((rec,))


def test_ctypes_binding_against_the_fake(fake_lib: Path) -> None:
    from fixbits.cublas.lt import CublasLt, NoAlgorithmError

    with CublasLt(str(fake_lib)) as lt:
        assert lt.api_kind == "ctypes" and lt.version_str == "13.1.0" and lt.library_path == str(fake_lib)
        ans = lt.heuristic(32, 32, 11528, "fp16", "fp32")
        assert ans.key() == (66, 10, 9, 2, 0, 0, 17) and ans.workspace_size == (32 << 20) // 2
        assert lt.heuristic(1, 8, 57608, "bf16", "fp32").splitk_num == 45
        assert lt.heuristic(1, 8, 57608, "fp16", "fp32", workspace_bytes=0).splitk_num == 1
        assert lt.heuristic(16, 64, 12800, "fp8_e4m3", "fp32").splitk_num == 10  # K from the transposed A
        with pytest.raises(
            NoAlgorithmError, match="cublasLtMatmulAlgoGetHeuristic failed: CUBLAS_STATUS_NOT_SUPPORTED"
        ):
            lt.heuristic(1, 8, 2_000_000)
