#!/usr/bin/env bash
# Session 41's second H100 call: the first (s41_plan.sh) spent pin_granules' budget on the CPU-bound
# search for parting shapes (157 s), so nothing was drawn; this draws at the 88 entries' shapes it
# found (benchmarks/reconstruction/h100/s41/pin_search/pin_granules.json), then fp8 phase B from
# matrices/profiles (1,326 entries) and a sweep of fuzz shapes 13000..14999. On an H200: s40b_plan.sh.
set -u
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)
if [[ "$gpu" != *H200* ]]; then
  bash runners/device/run_all.sh \
    pin_granules@draw:${S41_PIN_S:-100}:--found,benchmarks/reconstruction/h100/s41/pin_search/pin_granules.json
  export S39B_RUN=fp8m S39B_SWEEP_RUN=fp8n S39B_FROM=13000 S39B_FP8_S=${S41_FP8_S:-150} S39B_CHECK_S=${S41_CHECK_S:-80}
  exec bash runners/device/s39b_plan.sh "$@"
fi
exec bash runners/device/s40b_plan.sh "$@"
