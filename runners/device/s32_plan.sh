#!/usr/bin/env bash
# Session 32's checker call: the soundness gate of this session's checker on the GPU, each config
# signed for its own launch (--launch-spec). The device compiles every config itself (no AOT
# store: Triton's own sm_90 PTX of this very run is what gets signed), launches it, and hashes
# its output bytes on 4 draws (ordinary and wide exponents, two seeds). Launch mode has not been
# measured on a GPU before (session 21's run loaded an AOT store that holds no PTX).
set -u
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)
echo "=== card: $gpu"
bash runners/device/run_all.sh checker_soundness@launch:${S32_SOUND_S:-470}:--launch-spec
