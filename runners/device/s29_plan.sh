#!/usr/bin/env bash
# Next session's first call (written in session 28); on an H200, session 24's plan (on_h200.sh).
# Elsewhere:
# 1. the whole fp8 table with --tune-limit 5, so the four-warpgroup 256x128 / 128x256 fp8 tiles
#    (matrices/kernels/tensor_core.yaml, never timed) compete for M >= 2048, seeded with session
#    28's winners; every candidate's bytes compared with cuBLASLt's;
# 2. phase B of the narrow pairs, continued: the 304 answers n15's fuzz shapes reached on the H200
#    that no entry has been probed for after session 28 (benchmarks/reconstruction/h100/s28/
#    phaseb_targets_s29.args).
set -u
source runners/device/on_h200.sh
bash runners/device/run_all.sh \
  kernels_bench@fp8w16:${S29_BENCH_S:-230}:--pair,fp8_e4m3:fp32,--tune-limit,5,--check-candidates,--no-compile,--seed-tuned,benchmarks/gemm/h100/s28/fp8_m1k/tuned_configs.json \
  reconstruct@phaseb2:${S29_PHASEB_S:-250}:--pairs,fp16:fp16,bf16:bf16,--seed-profiles,matrices/profiles,--fuzz,2000,--narrow-sweep,none,--sweep-share,0.03,--per-answer-s,90,@benchmarks/reconstruction/h100/s28/phaseb_targets_s29.args
