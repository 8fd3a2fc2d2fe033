#!/usr/bin/env bash
# Session 28, third call. On an H200: session 24's H200 plan (as s28_plan.sh). Elsewhere:
# 1. orientation_check of bf16->fp32 c50 only, probing N == 1 at K = 96 (call 2 found that the
#    K = 61 descriptor parts from cuBLASLt there);
# 2. the whole fp8 table seeded with call 2's winners, 256x128 fp8 tiles now also for M 1024-2047.
set -u
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)
echo "=== card: $gpu"
if [[ "$gpu" == *H200* ]]; then
  S24_BENCH_S=${S28_BENCH_S:-400} bash runners/device/s24_plan.sh
  exit 0
fi
bash runners/device/run_all.sh \
  orientation_check@k96:${S28_ORIENT_S:-60}:--targets,bf16:fp32:a13-t0-s1-r0-w0-c50-g0,--probe,bf16:fp32:53823x1x96,bf16:fp32:131072x1x96,--per-side,8 \
  kernels_bench@fp8m1k:${S28_BENCH_S:-250}:--pair,fp8_e4m3:fp32,--tune-limit,3,--check-candidates,--no-compile,--seed-tuned,benchmarks/gemm/h100/s28/fp8_big/tuned_configs.json
