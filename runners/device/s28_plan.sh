#!/usr/bin/env bash
# Session 28's device calls: bash runners/device/s28_plan.sh 1|2|3|4 (each sources on_h200.sh
# first, so on an H200 every call runs session 24's H200 plan instead). On an H100:
#   1. the whole fp8 table on the session-27 body (split-K parts with TMA + swap, tail by TMA
#      zero-fill), seeded with session 26's and 27's winners, every candidate's bytes compared with
#      cuBLASLt's; fp8 matmul_check; the GPU suite's every-config test for fp8 and split-K (the
#      review pass's tail edit, 0d476d3, on a GPU for the first time);
#   2. orientation_check of the GEMV entries used in the orientation they were not probed in; the
#      whole fp8 table with the 256x128 / 128x256 fp8 tiles timed first for M >= 2048;
#   3. orientation_check of bf16->fp32 c50 probing N == 1 at K = 96; the fp8 table with 256x128
#      also for M 1024-2047;
#   4. orientation_check with the mirror images of the narrow c93 entries' probe shapes; phase B
#      of the narrow pairs (answers n15 reached on the H200 that no entry was probed for).
set -u
source runners/device/on_h200.sh
FP8="--pair,fp8_e4m3:fp32,--tune-limit,3,--check-candidates,--no-compile,--seed-tuned"
case "${1:?call number 1-4}" in
  1)
    bash runners/device/run_all.sh \
      kernels_bench@fp8all:250:$FP8,benchmarks/gemm/h100/s26/fp8_all/tuned_configs.json,benchmarks/gemm/h100/s27/fp8_tail/tuned_configs.json \
      matmul_check@fp8:70:--pairs,fp8_e4m3:fp32
    export PYTHONPATH=/tmp/site:$PWD
    timeout 150 python3 -m pytest -p no:cacheprovider -q -n 8 --arch sm_90 \
      suites/reconstruction/test_kernels_gpu.py -k "every_config and (fp8 or splitk)" \
      --junitxml="$OUT/suite_every_config.xml" > "$OUT/suite_every_config.log" 2>&1
    echo "=== suite rc=$?"; tail -n 15 "$OUT/suite_every_config.log" | cut -c1-220 ;;
  2)
    bash runners/device/run_all.sh orientation_check:150 \
      kernels_bench@fp8big:250:$FP8,benchmarks/gemm/h100/s28/fp8_all/tuned_configs.json ;;
  3)
    bash runners/device/run_all.sh \
      orientation_check@k96:60:--targets,bf16:fp32:a13-t0-s1-r0-w0-c50-g0,--probe,bf16:fp32:53823x1x96,bf16:fp32:131072x1x96,--per-side,8 \
      kernels_bench@fp8m1k:250:$FP8,benchmarks/gemm/h100/s28/fp8_big/tuned_configs.json ;;
  4)
    bash runners/device/run_all.sh \
      orientation_check@mirror:40:--targets,fp16:fp16:a13-t0-s1-r0-w0-c93-g0,fp16:fp16:a13-t0-s33-r2-w0-c93-g0,bf16:bf16:a13-t0-s33-r2-w0-c93-g0,--shapes,1518x1x2216,55x1x42358,2x1x76684,1x1518x2216,1x55x42358,1x2x76684,--probe,fp16:fp16:1518x1x2216,--probe-s,25 \
      reconstruct@phaseb:460:--pairs,fp16:fp16,bf16:bf16,--seed-profiles,matrices/profiles,--fuzz,2000,--narrow-sweep,none,--sweep-share,0.03,--per-answer-s,90,@benchmarks/reconstruction/h100/s28/phaseb_targets.args ;;
  *) echo "s28_plan.sh: call number 1-4, got $1" >&2; exit 2 ;;
esac
