#!/usr/bin/env bash
# The next session's device call. On an H200: session 37's plan (runners/device/s38_plan.sh; "a" is
# issue 4's benchmark, "b" issue 7's soundness gate, "c" phase B of n15's uncovered answers). On an
# H100: fp8_e4m3 -> fp32 answers still failed or never reached (82 left and 224 failed after session
# 38; phase B now draws span granule readings and asks the heuristic for K where readings part) for
# S39_FP8_S seconds, then S39_CHECK_S seconds sweeping fuzz shapes 5000..6999 of the seeded sequence
# (no run has drawn them) against the result; unchecked rows are finished on the CPU afterwards
# (reconstruct.py --check DIR --only-unchecked).
set -u
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)
if [[ "$gpu" == *H200* ]]; then
  exec bash runners/device/s38_plan.sh "$@"
fi
echo "=== card: $gpu"
bash runners/device/run_all.sh \
  reconstruct@fp8e:${S39_FP8_S:-250}:--pairs,fp8_e4m3:fp32,--seed-profiles,matrices/profiles,--fuzz,500,--sweep-share,0.02,--per-answer-s,90
# the sweep reads the profile phase B just wrote (the results folder run_all.sh keeps)
bash runners/device/run_all.sh \
  reconstruct@fp8f:${S39_CHECK_S:-150}:--pairs,fp8_e4m3:fp32,--profiles,/tmp/fixbits_results/reconstruct_fp8e/profiles,--fuzz,7000,--fuzz-from,5000
