#!/usr/bin/env bash
# The next session's device call. On an H200: session 40's plan (s40b_plan.sh -> s38_plan.sh; "a"
# issue 4's benchmark first, no H200 has started since session 31). On an H100: draw cuBLAS at the
# 171 shapes session 41 found where 88 open split granules part (pin_granules --found; keep
# benchmarks/reconstruction/h100/s41 on the device when setting records aside), then the 16-bit
# fp32-output profiles swept on fuzz shapes 9000..10999 (last fresh 16-bit sweep: session 40).
set -u
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)
if [[ "$gpu" == *H200* ]]; then
  exec bash runners/device/s40b_plan.sh "$@"
fi
bash runners/device/run_all.sh \
  pin_granules@draw:${S42_PIN_S:-90}:--found,benchmarks/reconstruction/h100/s41/pin_search/pin_granules.json \
  reconstruct@w16b:${S42_W16_S:-200}:--pairs,fp16:fp32,bf16:fp32,--profiles,matrices/profiles,--fuzz,11000,--fuzz-from,9000
