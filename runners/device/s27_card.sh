#!/usr/bin/env bash
# Session 27: one call's work by the card lent. On an H200 (issue 4's target card): session 24's
# H200 plan (fused-pair bytes of 16x4096x4096, the whole fp16 table); a later call on the same
# card runs s27_plan.sh. On any other card: s27_plan.sh with the GPU suite's every-config test.
set -u
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)
if [[ "$gpu" == *H200* && "${S27_FORCE_PLAN:-0}" != 1 ]]; then
  bash runners/device/s24_plan.sh
else
  S27_SUITE=1 bash runners/device/s27_plan.sh
fi
