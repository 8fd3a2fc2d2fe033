#!/usr/bin/env bash
# Session 26's device call: the fp8 per-MMA TMA body with one promotion group per turn in flight
# while the previous group's partial is added (fixbits/kernels/_tensorcore.py: tma_turns), side by
# side with the body before it (the file kept in .ab/ by the caller, swapped in for the second
# run), every tuning candidate's bytes compared with cuBLAS's; then fixbits.matmul's fp8 bytes on
# the realistic and fuzz shapes (matmul_check, ordinary and wide draws) with the new body.
# On an H200 the fp16 table of issue 4 follows when S26_FP16_S is set.
set -u
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)
echo "=== card: $gpu"
FP8="--pair,fp8_e4m3:fp32,--per-cell,5,--tune-limit,0,--check-candidates,--no-compile"
FP8="$FP8,--seed-tuned,benchmarks/gemm/h100/s22/fp8_57/tuned_configs.json"
bash runners/device/run_all.sh kernels_bench@fp8new:${S26_FP8_S:-170}:$FP8
if [ -f .ab/_tensorcore_old.py ]; then
  cp fixbits/kernels/_tensorcore.py /tmp/_tensorcore_new.py
  cp .ab/_tensorcore_old.py fixbits/kernels/_tensorcore.py
  bash runners/device/run_all.sh kernels_bench@fp8old:${S26_FP8_S:-170}:$FP8
  cp /tmp/_tensorcore_new.py fixbits/kernels/_tensorcore.py
fi
if [ "${S26_CHECK_S:-120}" != 0 ]; then
  bash runners/device/run_all.sh matmul_check@fp8:${S26_CHECK_S:-120}:--pairs,fp8_e4m3:fp32
fi
if [[ "$gpu" == *H200* && -n "${S26_FP16_S:-}" ]]; then
  bash runners/device/run_all.sh fused_shape_check:20 \
    kernels_bench@s26:${S26_FP16_S}:--seed-tuned,benchmarks/gemm/h200/run15/tuned_configs.json,benchmarks/gemm/h100/s22/slow24/tuned_configs.json,--compile-share,0.04,--tune-limit,2,--tune-by,graph
fi
