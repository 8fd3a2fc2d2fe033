"""The launch classifier on kernel-name lists recorded on an H200 (FINDINGS.md) and the rules file."""

from __future__ import annotations

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from fixbits.cublas.profile import (
    FAMILIES,
    UNKNOWN,
    RulesError,
    calls_from_trace,
    classify,
    launches_from_trace,
    load_rules,
    nvjet_tile,
    parse_rules,
    profile_from_names,
)

pytestmark = pytest.mark.unit

SPLITK_REDUCE = (
    "void cublasLt::splitKreduce_kernel<32, 16, int, float, __half, float, __half, true, false, false>"
    "(cublasLt::cublasSplitKParams<float>, float const*, __half const*, __half*, float const*, float const*, "
    "__half const*, __half const*, __half*, void*, long, float*, int*)"
)
FILL = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<c10::Half>, std::array<char*, 1ul> >(int, at::native::FillFunctor<c10::Half>, std::array<char*, 1ul>)"

# (kernel names in launch order, expected family, expected candidates)
RECORDED = [
    (["nvjet_sm90_hsh_128x8_64x12_4x1_v_bz_splitK_NNT", SPLITK_REDUCE], "nvjet_splitk", ("nvjet_splitk",)),
    (["nvjet_sm90_hsh_64x8_64x16_1x1_h_bz_splitK_NNT", SPLITK_REDUCE], "nvjet_splitk", ("nvjet_splitk",)),
    (["nvjet_sm90_tst_128x16_64x8_2x1_v_bz_splitK_NNT", SPLITK_REDUCE], "nvjet_splitk", ("nvjet_splitk",)),
    (["nvjet_sm90_hsh_128x64_64x8_1x2_h_bz_NNT"], "nvjet_single_pass", ("nvjet_single_pass",)),
    (["nvjet_sm90_hsh_256x128_64x4_1x2_h_bz_coopA_NNT"], "nvjet_single_pass", ("nvjet_single_pass",)),
    ([FILL, "nvjet_sm90_hss_320x128_64x3_1x2_h_bz_coopB_NNT"], "nvjet_single_pass", ("nvjet_single_pass",)),
    (
        [
            "void cutlass::Kernel2<cutlass_75_tensorop_s1688gemm_f16_64x64_32x6_nn_align1>(cutlass_75_tensorop_s1688gemm_f16_64x64_32x6_nn_align1::Params)"
        ],
        "cutlass_per_mma",
        ("cutlass_per_mma",),
    ),
    (
        [
            "void cutlass::Kernel2<cutlass_75_tensorop_s1688gemm_f16_64x64_32x6_nn_align1>(Params)",
            SPLITK_REDUCE,
        ],
        "cutlass_splitk_per_mma",
        ("cutlass_splitk_per_mma",),
    ),
    (
        [
            "void gemmSN_NN_kernel<__half, 256, 4, 2, 8, 4, 4, false, cublasGemvTensorStridedBatched<__half const> >(...)"
        ],
        "gemmsn_chain",
        ("gemmsn_chain",),
    ),
    (
        [
            "void gemv2T_kernel_val<int, int, __half, __half, float, float, 128, 16, 4, 4, false, false>(...)",
            "void reduce_1Block_kernel<float, float, float, 128, 7>(...)",
        ],
        "workspace_gemv",
        ("workspace_gemv",),
    ),
    (
        ["void gemv2T_kernel_val<int, int, __half, __half, float, float, 128, 16, 4, 4, false, false>(...)"],
        UNKNOWN,
        ("gemv2t_lane_tree", "gemv2t_contiguous"),
    ),
    (
        [
            "void gemvx::kernel<int, int, __half, __half, float, float, false, true, true, false, 7, false>(...)"
        ],
        UNKNOWN,
        ("gemv2t_lane_tree", "gemv2t_contiguous"),
    ),
    (
        [
            "void dot_kernel<float, 128, 0, cublasDotParams<cublasGemvTensor<__half const>, cublasGemvTensor<float> > >(...)"
        ],
        UNKNOWN,
        ("gemv2t_lane_tree", "gemv2t_contiguous"),
    ),
    # recorded on the H200 (cublas_probe run2, cuBLASLt 13.1.0)
    (
        [
            "void dot_kernel<float, 128, 0, cublasDotParams<cublasGemvTensorStridedBatched<__half const>, "
            "cublasGemvTensorStridedBatched<float> > >(...)",
            "void reduce_1Block_kernel<float, 128, 7, cublasGemvTensorStridedBatched<float>, "
            "cublasGemvTensorStridedBatched<float> >(...)",
        ],
        "workspace_gemv",
        ("workspace_gemv",),
    ),
    (
        [
            "void cutlass::Kernel2<cutlass_75_wmma_tensorop_s161616gemm_f16_16x16_128x1_nn_align1>(Params)",
            "void cublasLt::splitKreduce_kernel<32, 16, int, float, float, float, float, false, float, float, float, "
            "true, false, false>(...)",
        ],
        "cutlass_splitk_per_mma",
        ("cutlass_splitk_per_mma",),
    ),
    (
        [
            "void gemmSN_NN_kernel<float, 256, 4, 2, 8, 2, 4, false, cublasGemvTensorStridedBatched<__half const>>(...)"
        ],
        "gemmsn_chain",
        ("gemmsn_chain",),
    ),
    (
        [
            "std::enable_if<!(false), void>::type internal::gemvx::kernel<int, int, __half, float, float, float>(...)"
        ],
        UNKNOWN,
        ("gemv2t_lane_tree", "gemv2t_contiguous"),
    ),
    (["some_other_kernel"], UNKNOWN, ()),
    ([], UNKNOWN, ()),
    ([FILL], UNKNOWN, ()),
]


@pytest.mark.parametrize(
    "names,family,candidates", RECORDED, ids=[f"{i}-{r[1]}" for i, r in enumerate(RECORDED)]
)
def test_classify_recorded_names(names: list[str], family: str, candidates: tuple[str, ...]) -> None:
    got = classify(names)
    assert (got.family, got.candidates) == (family, candidates), f"{names} -> {got}"
    assert got.narrowed == (len(candidates) > 1)


def test_profile_record_flags() -> None:
    prof = profile_from_names(["nvjet_sm90_hsh_64x8_64x16_1x1_h_bz_splitK_NNT", SPLITK_REDUCE], memsets=1)
    assert prof.count == 2 and prof.splitk_reduce and not prof.workspace_reduce and prof.memsets == 1
    assert prof.family == "nvjet_splitk"
    assert prof.to_dict()["kernels"][0].startswith("nvjet_sm90")


def test_nvjet_tile() -> None:
    assert nvjet_tile("nvjet_sm90_hsh_64x8_64x16_1x1_h_bz_splitK_NNT") == {
        "block_m": 64,
        "block_n": 8,
        "block_k": 64,
        "stages": 16,
    }
    assert nvjet_tile("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT")["block_k"] == 64  # type: ignore[index]
    assert nvjet_tile("cutlass_75_tensorop_s1688gemm") is None


def test_rules_file_is_valid_and_every_family_reachable() -> None:
    rules = load_rules()
    reachable = {f for r in rules.rules for f in r.families}
    assert reachable == set(FAMILIES), f"families no rule reaches: {set(FAMILIES) - reachable}"
    assert set(rules.desc_family) == set(FAMILIES)


def _doc() -> dict:
    from fixbits.cublas.profile import DEFAULT_RULES

    with open(DEFAULT_RULES) as fh:
        return yaml.safe_load(fh)


@pytest.mark.parametrize(
    "mutate,needle",
    [
        (lambda d: d["rules"][0].update({"all": ["(unclosed"]}), "rules[0].all: bad regex"),
        (lambda d: d["rules"][1].update({"families": ["no_such_family"]}), "rules[1].families"),
        (lambda d: d["families"].pop("gemmsn_chain"), "families must name exactly"),
        (lambda d: d["rules"][2].update({"colour": 1}), "rules[2]: unknown key(s) colour"),
        (lambda d: d["rules"][3].update({"name": d["rules"][0]["name"]}), "rules[3].name"),
        (lambda d: d["rules"][0].update({"basis": "guess"}), "rules[0].basis"),
    ],
)
def test_bad_rules_name_the_key(mutate, needle: str) -> None:  # type: ignore[no-untyped-def]
    doc = _doc()
    mutate(doc)
    with pytest.raises(RulesError, match=None) as err:
        parse_rules(doc, where="kernel_families.yaml")
    assert needle in str(err.value) and "kernel_families.yaml" in str(err.value), str(err.value)


def test_launches_from_chrome_trace() -> None:
    trace = {
        "traceEvents": [
            {
                "ph": "X",
                "cat": "kernel",
                "name": SPLITK_REDUCE,
                "ts": 20.0,
                "dur": 2.0,
                "args": {"grid": [1, 1, 1], "block": [128, 1, 1]},
            },
            {
                "ph": "X",
                "cat": "kernel",
                "name": "nvjet_sm90_hsh_64x8_64x16_1x1_h_bz_splitK_NNT",
                "ts": 10.0,
                "dur": 5.0,
                "args": {"grid": [1, 1, 9], "block": [384, 1, 1]},
            },
            {"ph": "X", "cat": "gpu_memset", "name": "Memset (Device)", "ts": 5.0, "dur": 1.0},
            {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 1.0, "dur": 30.0},
        ]
    }
    launches, memsets = launches_from_trace(trace)
    assert [k.name[:9] for k in launches] == ["nvjet_sm9", "void cubl"]
    assert launches[0].grid == (1, 1, 9) and launches[1].block == (128, 1, 1)
    assert memsets == 1


NVJET = "nvjet_sm90_hsh_64x8_64x16_1x1_h_bz_splitK_NNT"


def _x(cat: str, name: str, ts: float, dur: float = 1.0, **args: object) -> dict[str, object]:
    return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "args": dict(args)}


def _session_trace() -> dict[str, object]:
    """Two annotated calls in one session, operand draws before and between them (a synthetic
    kineto export: CPU launch events and GPU events share ``args.correlation``)."""
    return {
        "traceEvents": [
            # operand generation before call 0: launched and run outside every window
            _x("cuda_runtime", "cudaLaunchKernel", 1.0, correlation=1),
            _x("kernel", FILL, 3.0, correlation=1),
            # call 0: CPU range [10, 30], GPU range [12, 40]
            _x("user_annotation", "fixbits_call:0", 10.0, 20.0),
            _x("gpu_user_annotation", "fixbits_call:0", 12.0, 28.0),
            _x("Cuda_Runtime", "cudaMemsetAsync", 11.0, correlation=2),
            _x("gpu_memset", "Memset (Device)", 12.0, correlation=2),
            _x("cuda_driver", "cuLaunchKernelEx", 13.0, correlation=3),
            _x("cuda_runtime", "cudaLaunchKernel", 14.0, correlation=4),
            _x("Kernel", SPLITK_REDUCE, 30.0, correlation=4, grid=[1, 1, 1]),
            _x("kernel", NVJET, 15.0, correlation=3, grid=[1, 1, 9]),
            # between the calls: an operand draw, its kernel running late into call 1's GPU range
            _x("cuda_runtime", "cudaLaunchKernel", 45.0, correlation=5),
            _x("kernel", FILL, 61.0, correlation=5),
            # call 1: CPU range [50, 60], GPU range [60, 80]; one kernel without a launch event
            _x("user_annotation", "fixbits_call:1", 50.0, 10.0),
            _x("gpu_user_annotation", "fixbits_call:1", 60.0, 20.0),
            _x("cuda_runtime", "cudaLaunchKernel", 52.0, correlation=6),
            _x("kernel", NVJET, 62.0, correlation=6),
            _x("kernel", SPLITK_REDUCE, 70.0, correlation=99),
            _x("gpu_memset", "Memset (Device)", 65.0),
            _x("gpu_memset", "Memset (Device)", 66.0, correlation=98),
            # after the session's calls, in no window; and a flow event, not a complete one
            _x("kernel", FILL, 90.0),
            {"ph": "s", "cat": "ac2g", "name": "ac2g", "ts": 14.0, "id": 4},
        ]
    }


def test_calls_from_trace_assigns_by_correlation() -> None:
    (k0, m0), _ = calls_from_trace(_session_trace(), 2)
    assert [k.name for k in k0] == [NVJET, SPLITK_REDUCE]  # start order, not launch order
    assert k0[0].grid == (1, 1, 9) and m0 == 1


def test_calls_from_trace_falls_back_to_the_gpu_range() -> None:
    _, (k1, m1) = calls_from_trace(_session_trace(), 2)
    # NVJET by its launch; SPLITK_REDUCE (no launch event) by the GPU range; the operand draw
    # launched between the calls is dropped though it ran inside call 1's GPU range
    assert [k.name for k in k1] == [NVJET, SPLITK_REDUCE]
    assert m1 == 2  # memsets without a launch event, counted by the GPU range


def test_calls_from_trace_drops_work_outside_every_call() -> None:
    calls = calls_from_trace(_session_trace(), 2)
    assert all(FILL not in [k.name for k in ks] for ks, _ in calls)
    assert len(launches_from_trace(_session_trace())[0]) == 7  # the session-wide view keeps all
    # a window past ``calls`` is not a call; a session with nothing annotated gives empty calls
    assert [len(ks) for ks, _ in calls_from_trace(_session_trace(), 1)] == [2]
    assert calls_from_trace({"traceEvents": [_x("kernel", NVJET, 1.0)]}, 2) == [((), 0), ((), 0)]


FRAGMENTS = [r[0] for r in RECORDED]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.sampled_from([n for names in FRAGMENTS for n in names] + [FILL]), max_size=4), st.randoms()
)
def test_classification_ignores_launch_order(names: list[str], rnd) -> None:  # type: ignore[no-untyped-def]
    shuffled = list(names)
    rnd.shuffle(shuffled)
    a, b = classify(names), classify(shuffled)
    assert a == b, f"{names} vs {shuffled}"
    assert a.family in (*FAMILIES, UNKNOWN) and set(a.candidates) <= set(FAMILIES)


def test_algo_id_narrowing() -> None:
    rules = load_rules()
    assert rules.families_for_algo(66) == ("nvjet_single_pass", "nvjet_splitk")
    assert rules.families_for_algo(12345) == FAMILIES
    # every recorded launch's family is among what its ALGO_ID allows (FINDINGS.md pairs)
    for algo, names in ((66, RECORDED[0][0]), (66, RECORDED[3][0]), (24, RECORDED[6][0])):
        assert classify(names).family in rules.families_for_algo(algo)
    doc = _doc()
    doc["algo_ids"][66]["families"] = ["nope"]
    with pytest.raises(RulesError, match="algo_ids.66.families"):
        parse_rules(doc, where="kernel_families.yaml")
