#!/usr/bin/env bash
# Session 27, last call. On an H200 (issue 4's target card): session 24's H200 plan with a shorter
# benchmark (S24_BENCH_S, default 250 s here). On any other card: 1,000 more fuzz shapes for the
# two fp32 16-bit pairs (fixbits.matmul against cuBLASLt, 10 draws each), the first 399 fuzz
# shapes and the 390 realistic ones taken over from this session's earlier matmul_check CSVs.
set -u
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)
echo "=== card: $gpu"
D=benchmarks/gemm/h100/s27
if [[ "$gpu" == *H200* ]]; then
  S24_BENCH_S=${S24_BENCH_S:-250} bash runners/device/s24_plan.sh
else
  bash runners/device/run_all.sh \
    matmul_check@fuzz_bf16o32:${S27_FUZZ_S:-150}:--pairs,bf16:fp32,--fuzz,1400,--resume,$D/matmul_check_fp16o16_bf16o32/matmul_check.csv \
    matmul_check@fuzz_fp16o32:${S27_FUZZ_S:-150}:--pairs,fp16:fp32,--fuzz,1400,--resume,$D/matmul_check_fp16o32_bf16o16/matmul_check.csv
fi
