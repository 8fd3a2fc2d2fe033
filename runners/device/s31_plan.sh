#!/usr/bin/env bash
# Next session's first call (written in session 30); on an H200, session 24's plan (on_h200.sh).
# Elsewhere: phase B of the narrow pairs, continued, on the 137 answers n15's fuzz shapes reached
# on the H200 that no profile entry covers after both of session 30's calls (benchmarks/
# reconstruction/h100/s30/phaseb_targets_after_s30.args; 99 fp16->fp16 and 61 bf16->bf16
# answer-pair cells).
set -u
source runners/device/on_h200.sh
bash runners/device/run_all.sh \
  reconstruct@phaseb5:${S31_PHASEB_S:-470}:--pairs,fp16:fp16,bf16:bf16,--seed-profiles,matrices/profiles,--fuzz,2000,--narrow-sweep,none,--sweep-share,0.03,--per-answer-s,90,@benchmarks/reconstruction/h100/s30/phaseb_targets_after_s30.args
