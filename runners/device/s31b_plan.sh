#!/usr/bin/env bash
# Session 31's last call, made with needs_h200 and what device time was left (about 585 s): on an
# H200 (issue 4's target card), session 24's H200 plan with a shorter benchmark budget; on any
# other card nothing (phase B's open answers did not finish on an H100 in 225 s each this session).
set -u
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)
echo "=== card: $gpu"
if [[ "$gpu" == *H200* ]]; then
  S24_BENCH_S=${H200_BENCH_S:-360} bash runners/device/s24_plan.sh
fi
