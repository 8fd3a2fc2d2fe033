#!/usr/bin/env bash
# Session 39's second plan. On an H200: session 37's plan (runners/device/s38_plan.sh: "a" issue 4's
# benchmark, "b" issue 7's soundness gate, "c" phase B). On an H100: fp8_e4m3 -> fp32 probing steered by
# S39B_SCAN fuzz shapes of seed 1 (--scan-fuzz: the answers the gate's distribution meets most go first;
# session 39's first sweep found 405 of 2,000 fresh seed-0 shapes on 257 answers not in the profile) for
# S39B_FP8_S seconds, then S39B_CHECK_S seconds sweeping seed-0 fuzz shapes S39B_FROM .. +1999, which no
# run has drawn, against the result (run names S39B_RUN, S39B_SWEEP_RUN; later plans set these). "w" on
# an H100 (a warm follow-up): the 16-bit fp32-output profiles swept on seed-0 fuzz shapes 7000..8999 for
# S39B_W16_S seconds (no fresh-shape sweep of them since session 36).
set -u
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)
if [[ "$gpu" == *H200* ]]; then
  exec bash runners/device/s38_plan.sh "$@"
fi
echo "=== card: $gpu (part ${1:-fp8})"
if [[ "${1:-fp8}" == w ]]; then
  exec bash runners/device/run_all.sh \
    reconstruct@w16:${S39B_W16_S:-240}:--pairs,fp16:fp32,bf16:fp32,--profiles,matrices/profiles,--fuzz,9000,--fuzz-from,7000
fi
run=${S39B_RUN:-fp8g}
from=${S39B_FROM:-7000}
bash runners/device/run_all.sh \
  reconstruct@$run:${S39B_FP8_S:-280}:--pairs,fp8_e4m3:fp32,--seed-profiles,matrices/profiles,--fuzz,0,--scan-fuzz,${S39B_SCAN:-20000},--sweep-share,0.01,--per-answer-s,90
bash runners/device/run_all.sh \
  reconstruct@${S39B_SWEEP_RUN:-fp8h}:${S39B_CHECK_S:-150}:--pairs,fp8_e4m3:fp32,--profiles,/tmp/fixbits_results/reconstruct_$run/profiles,--fuzz,$((from + 2000)),--fuzz-from,$from
