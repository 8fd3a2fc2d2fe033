#!/usr/bin/env bash
# Session 41's device call. On an H200: session 40's plan (s40b_plan.sh -> s38_plan.sh; "a" issue 4's
# benchmark first). On an H100: first draw cuBLAS where the span granule of the split entries left
# open by their own shapes shows (runners/device/pin_granules.py; 88 fp8 entries, 6 of them at
# granule 64, the class session 40's sweep found wrong; judged on CPU by settle_steps.py), then
# session 40's H100 part (fp8 phase B from 1,227 entries, a sweep of fuzz shapes 11000..12999).
set -u
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)
if [[ "$gpu" != *H200* ]]; then
  bash runners/device/run_all.sh pin_granules:${S41_PIN_S:-110}
  export S40B_FP8_S=${S40B_FP8_S:-200} S40B_CHECK_S=${S40B_CHECK_S:-110}
fi
exec bash runners/device/s40b_plan.sh "$@"
