#!/usr/bin/env bash
# Next session's first call (written in session 29); on an H200, session 24's plan (on_h200.sh).
# Elsewhere:
# 1. phase B of the narrow pairs, continued: the 271 answers n15's fuzz shapes reached on the H200
#    that no entry has been probed for after session 29 (benchmarks/reconstruction/h100/s29/
#    phaseb_targets_s30.args; 175 fp16->fp16 and 134 bf16->bf16 answer-pair cells);
# 2. the whole fp8 table at --tune-limit 3 (the four-warpgroup tiles are out of the space since
#    session 29), seeded with session 28's winners; every candidate's bytes compared with cuBLASLt's.
set -u
source runners/device/on_h200.sh
bash runners/device/run_all.sh \
  reconstruct@phaseb3:${S30_PHASEB_S:-280}:--pairs,fp16:fp16,bf16:bf16,--seed-profiles,matrices/profiles,--fuzz,2000,--narrow-sweep,none,--sweep-share,0.03,--per-answer-s,90,@benchmarks/reconstruction/h100/s29/phaseb_targets_s30.args \
  kernels_bench@fp8s30:${S30_BENCH_S:-240}:--pair,fp8_e4m3:fp32,--tune-limit,3,--check-candidates,--no-compile,--seed-tuned,benchmarks/gemm/h100/s28/fp8_m1k/tuned_configs.json
