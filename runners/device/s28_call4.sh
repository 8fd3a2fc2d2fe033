#!/usr/bin/env bash
# Session 28, fourth call. On an H200: session 24's H200 plan. Elsewhere:
# 1. orientation_check of the narrow-output GEMV entries with the mirror images of their probe
#    shapes scanned first (the grid of call 2 reached neither orientation of fp16->fp16 c93);
# 2. phase B of issue 3 on the narrow pairs: the answers that n15's fuzz shapes reached on the H200
#    and that no profile entry has ever been probed for (benchmarks/reconstruction/h100/s28/
#    phaseb_targets.args), seeded with the committed profiles, no sweep.
set -u
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)
echo "=== card: $gpu"
if [[ "$gpu" == *H200* ]]; then
  S24_BENCH_S=${S28_BENCH_S:-400} bash runners/device/s24_plan.sh
  exit 0
fi
T=benchmarks/reconstruction/h100/s28/phaseb_targets.args
bash runners/device/run_all.sh \
  orientation_check@mirror:${S28_ORIENT_S:-40}:--targets,fp16:fp16:a13-t0-s1-r0-w0-c93-g0,fp16:fp16:a13-t0-s33-r2-w0-c93-g0,bf16:bf16:a13-t0-s33-r2-w0-c93-g0,--shapes,1518x1x2216,55x1x42358,2x1x76684,1x1518x2216,1x55x42358,1x2x76684,--probe,fp16:fp16:1518x1x2216,--probe-s,25 \
  reconstruct@phaseb:${S28_PHASEB_S:-460}:--pairs,fp16:fp16,bf16:bf16,--seed-profiles,matrices/profiles,--fuzz,2000,--narrow-sweep,none,--sweep-share,0.03,--per-answer-s,90,@$T
