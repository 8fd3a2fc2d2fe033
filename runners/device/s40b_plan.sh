#!/usr/bin/env bash
# Session 40's plan for the next session's device call. On an H200: session 37's plan
# (runners/device/s38_plan.sh: "a" issue 4's benchmark, "b" issue 7's soundness gate, "c" phase B;
# no H200 has started since session 31). On an H100: fp8_e4m3 -> fp32 phase B from matrices/profiles
# (1,227 entries) steered by the fuzz shapes of seed 1 (396 of its answers were left at session 40's
# deadline) for S40B_FP8_S seconds, then S40B_CHECK_S seconds sweeping seed-0 fuzz shapes
# 11000..12999, which no run has drawn, against the result.
set -u
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)
if [[ "$gpu" == *H200* ]]; then
  exec bash runners/device/s38_plan.sh "$@"
fi
echo "=== card: $gpu (part ${1:-fp8})"
bash runners/device/run_all.sh \
  reconstruct@fp8k:${S40B_FP8_S:-250}:--pairs,fp8_e4m3:fp32,--seed-profiles,matrices/profiles,--fuzz,0,--scan-fuzz,20000,--sweep-share,0.01,--per-answer-s,90
bash runners/device/run_all.sh \
  reconstruct@fp8l:${S40B_CHECK_S:-120}:--pairs,fp8_e4m3:fp32,--profiles,/tmp/fixbits_results/reconstruct_fp8k/profiles,--fuzz,13000,--fuzz-from,11000
