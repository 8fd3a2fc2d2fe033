#!/usr/bin/env bash
# Session 23's device call: the whole fp16 benchmark on an H200 (issue 4's target card), or,
# when the call lands on another card, the warp-specialized fp16 study on the slowest shapes.
set -u
SLOW=1024x1536x2048%2C1024x1536x3072%2C1024x4608x2688%2C1024x5120x2048%2C1024x5120x2560%2C1024x5120x2880%2C16384x32768x64%2C16384x4096x64%2C256x10240x2048%2C256x12288x6144%2C256x17408x5120%2C256x18432x7168%2C256x18432x8192%2C256x2048x10240%2C256x2048x6144%2C256x2048x8192%2C256x3072x7168%2C256x5120x17408%2C3072x1536x2048%2C3072x1536x3072%2C3072x2880x2880%2C3072x512x2048%2C3072x768x2048%2C3072x768x2560
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)
echo "=== card: $gpu"
if [[ "$gpu" == *H200* ]]; then
  bash runners/device/run_all.sh fused_shape_check:30 \
    kernels_bench@s23:440:--seed-tuned,benchmarks/gemm/h200/s23/seed.json,--compile-share,0.06,--tune-by,graph
else
  bash runners/device/run_all.sh kernels_bench@slowws:200:--only-shapes,$SLOW,--tune-limit,0,--check-candidates,--no-compile
fi
