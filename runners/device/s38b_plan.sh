#!/usr/bin/env bash
# Session 38's second device call. On an H200: session 37's plan (runners/device/s38_plan.sh; "a" is
# issue 4's benchmark). On an H100: fp8_e4m3 -> fp32 phase B for the 31 split-K answers withdrawn to
# probe again after the s38 sweep (their span granule was carried from a base; the prober now draws
# the granule readings too, reconstruct._granule_variants), then a sweep of the result: first the
# s38 sweep's shapes of those answers (--recheck-csv), then fuzz shapes 2000.. of the seeded
# sequence, which no run has swept. S38_FP8_S is the budget (its sweep share S38_FP8_SWEEP).
set -u
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)
if [[ "$gpu" == *H200* ]]; then
  exec bash runners/device/s38_plan.sh "$@"
fi
echo "=== card: $gpu"
S=benchmarks/reconstruction/h100/s38
bash runners/device/run_all.sh \
  reconstruct@fp8b:${S38_FP8_S:-330}:--pairs,fp8_e4m3:fp32,--seed-profiles,matrices/profiles,--fuzz,${S38_FP8_FUZZ:-3000},--fuzz-from,2000,--recheck-csv,$S/fp8s/sweep.csv,--sweep-share,${S38_FP8_SWEEP:-0.45},--per-answer-s,90,@$S/fp8_targets_s38b.args
