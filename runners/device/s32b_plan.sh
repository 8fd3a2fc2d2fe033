#!/usr/bin/env bash
# Session 32's issue-3 call on an H100: phase B on three of the a13-t0 answers (fp16->fp16
# priority answers) that session 31's scan reached but could not finish at 90 s each inside a
# 229 s pair deadline: one pair, the whole budget, up to 200 s per answer.
set -u
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)
echo "=== card: $gpu"
bash runners/device/run_all.sh \
  reconstruct@phaseb7:${S32B_PHASEB_S:-480}:--pairs,fp16:fp16,--seed-profiles,matrices/profiles,--fuzz,2000,--narrow-sweep,none,--sweep-share,0.03,--per-answer-s,200,@benchmarks/reconstruction/h100/s32/phaseb_a13.args
