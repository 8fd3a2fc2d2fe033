#!/usr/bin/env bash
# Session 26's fp8 device call (benchmarks/gemm/h100/s26): the fp8 benchmark on 57 shapes with
# every tuning candidate timed and its bytes compared with cuBLASLt's (B K-major on both sides,
# bench.py's operands), then fixbits.matmul's fp8 bytes on the realistic and fuzz shapes
# (matmul_check: 10 draws a shape, B row-major and K-major) unless S26_CHECK_S=0.
# Calls 1 and 2 also ran the same benchmark a second time with a one-turn-late promotion body
# swapped into fixbits/kernels/_tensorcore.py from an untracked copy; that body was measured
# slower and taken out, so only the run of the body in the tree is left here.
set -u
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)
echo "=== card: $gpu"
FP8="--pair,fp8_e4m3:fp32,--per-cell,5,--tune-limit,0,--check-candidates,--no-compile"
FP8="$FP8,--seed-tuned,benchmarks/gemm/h100/s22/fp8_57/tuned_configs.json"
bash runners/device/run_all.sh kernels_bench@fp8:${S26_FP8_S:-170}:$FP8
if [ "${S26_CHECK_S:-120}" != 0 ]; then
  bash runners/device/run_all.sh matmul_check@fp8:${S26_CHECK_S:-120}:--pairs,fp8_e4m3:fp32
fi
