#!/usr/bin/env bash
# Session 23's device call: the whole fp16 benchmark, on an H200 only (issue 4's target card); on
# any other card it stops at once (a same-card figure is what the issue asks for). Seeds: run15's
# winners, with the H100 slow24 run's winners for its 24 shapes (the later file wins a shape).
set -u
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)
echo "=== card: $gpu"
if [[ "$gpu" == *H200* ]]; then
  bash runners/device/run_all.sh fused_shape_check:20 \
    kernels_bench@s23:370:--seed-tuned,benchmarks/gemm/h200/run15/tuned_configs.json,benchmarks/gemm/h100/s22/slow24/tuned_configs.json,--compile-share,0.04,--tune-limit,2,--tune-by,graph
else
  echo "=== not an H200: nothing run"
fi
