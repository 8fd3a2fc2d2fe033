#!/usr/bin/env bash
# Session 33's device calls, chosen by card. On an H200 (issues 4 and 7's target card): call "a" is
# issue 4's benchmark plan (session 31's H200 plan, seeded with run15's winners); call "b" is issue
# 7's soundness gate in launch mode on the H200 itself (session 32 ran it on an H100). On an H100:
# issue 3's phase B on the three a13-t0 fp16 answers (session 32's plan, never started).
set -u
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)
echo "=== card: $gpu (part ${1:-a})"
if [[ "$gpu" == *H200* ]]; then
  case "${1:-a}" in
    a) H200_BENCH_S=${H200_BENCH_S:-360} bash runners/device/s31b_plan.sh ;;
    b) bash runners/device/s32_plan.sh ;;
    c) bash runners/device/s32b_plan.sh ;;
  esac
else
  bash runners/device/s32b_plan.sh
fi
