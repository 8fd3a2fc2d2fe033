#!/usr/bin/env bash
# Session 28, second call. On an H200: session 24's H200 plan (as s28_plan.sh). Elsewhere:
# 1. orientation_check: the GEMV answers used in the orientation they were not probed in
#    (bf16->fp32 c50 at N = 1, fp16->fp16 c93 and s33-c93, bf16->bf16 s33-c93): cuBLASLt's bytes
#    against the emulator on the profile's entry, and the prober where they part.
# 2. the whole fp8 table again, seeded with call 1's winners, the 256x128 / 128x256 fp8 entries now
#    first for M >= 2048 (matrices/kernels/tensor_core.yaml), every candidate compared with cuBLASLt.
set -u
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)
echo "=== card: $gpu"
if [[ "$gpu" == *H200* ]]; then
  S24_BENCH_S=${S28_BENCH_S:-400} bash runners/device/s24_plan.sh
  exit 0
fi
bash runners/device/run_all.sh \
  orientation_check:${S28_ORIENT_S:-150} \
  kernels_bench@fp8big:${S28_BENCH_S:-250}:--pair,fp8_e4m3:fp32,--tune-limit,3,--check-candidates,--no-compile,--seed-tuned,benchmarks/gemm/h100/s28/fp8_all/tuned_configs.json
