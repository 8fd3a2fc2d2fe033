#!/usr/bin/env bash
# Session 38's fp8 device calls. On an H200: session 37's plan (runners/device/s38_plan.sh; "a" is
# issue 4's benchmark). On an H100: fp8_e4m3 -> fp32 phase B for the split-K answers withdrawn to
# probe again (S38_FP8_TARGETS, an args file: --only-answers and --recheck-answers lists; their span
# granule was carried from a base; the prober now draws the granule readings too and asks the
# heuristic for a K where readings part), then a sweep of the result: first the earlier sweeps' shapes
# of those answers (S38_RECHECK, comma-separated sweep.csv files), then fuzz shapes S38_FUZZ_FROM..
# S38_FP8_FUZZ of the seeded sequence. S38_FP8_S is the budget (its sweep share S38_FP8_SWEEP).
set -u
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)
if [[ "$gpu" == *H200* ]]; then
  exec bash runners/device/s38_plan.sh "$@"
fi
echo "=== card: $gpu"
S=benchmarks/reconstruction/h100/s38
bash runners/device/run_all.sh \
  reconstruct@${S38_TAG:-fp8b}:${S38_FP8_S:-330}:--pairs,fp8_e4m3:fp32,--seed-profiles,matrices/profiles,--fuzz,${S38_FP8_FUZZ:-3000},--fuzz-from,${S38_FUZZ_FROM:-2000},--recheck-csv,${S38_RECHECK:-$S/fp8s/sweep.csv},--sweep-share,${S38_FP8_SWEEP:-0.45},--per-answer-s,90,@${S38_FP8_TARGETS:-$S/fp8_targets_s38b.args}
