#!/usr/bin/env bash
# Session 27: fp8 split-K parts with TMA turns and swap-AB (splitk.part_knobs), taken by
# fixbits.matmul's cached split-K launcher (call 2; call 1 ran 1 and 2 on the reference path).
# 1. matmul_check fp8: every realistic and fuzz shape, 10 draws, B row-major and K-major, against
#    cuBLASLt's bytes (the fuzz set holds most of the profile's 70 fp8 split-K answers).
# 2. kernels_bench fp8 on the four moe_up split-K shapes (16xNxK, silu_gate and plain), every
#    tuning candidate timed and its bytes compared with cuBLASLt's.
# 3. (S27_SUITE=1) the GPU suite's every-config test for the fp8 and split-K families: every
#    equivalence config, fp8 with B row-major and K-major, equal bytes and the emulator agrees.
set -u
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)
echo "=== card: $gpu"
bash runners/device/run_all.sh \
  matmul_check@fp8:${S27_CHECK_S:-110}:--pairs,fp8_e4m3:fp32 \
  kernels_bench@fp8splitk:${S27_BENCH_S:-120}:--pair,fp8_e4m3:fp32,--tune-limit,0,--check-candidates,--no-compile,--seed-tuned,benchmarks/gemm/h100/s26/fp8_all/tuned_configs.json,--only-shapes,16x2048x8192%2C16x3072x7168%2C16x2048x6144%2C16x2048x7168
if [ "${S27_SUITE:-0}" = 1 ]; then
  export PYTHONPATH=/tmp/site:$PWD
  timeout "${S27_SUITE_S:-240}" python3 -m pytest -p no:cacheprovider -q -n 8 --arch sm_90 \
    suites/reconstruction/test_kernels_gpu.py -k "every_config and (fp8 or splitk)" \
    --junitxml="$OUT/suite_every_config.xml" > "$OUT/suite_every_config.log" 2>&1
  echo "=== suite rc=$?"; tail -n 15 "$OUT/suite_every_config.log" | cut -c1-220
fi
