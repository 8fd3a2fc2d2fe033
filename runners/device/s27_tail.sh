#!/usr/bin/env bash
# Session 27, last call: the fp8 single-pass TMA body whose last turn runs past K (TMA fills +0;
# _tensorcore.chain_promoted_tma TAIL_TMA), which frees the registers of the pointer-loaded tail
# and lets 128x256 tiles fit two warpgroups (ptxas_report: 255 registers, no C7514).
# 1. matmul_check fp8: bytes of every realistic and fuzz shape, both B layouts.
# 2. kernels_bench fp8 on 8 shapes above 5 GFLOP (the largest, K = 2880 and K = 64 ones), every
#    candidate of their class timed (the new 128x256 included) and compared with cuBLASLt.
set -u
S="16384x18432x8192,16384x10240x7168,1024x10240x4096,256x154880x6144,1024x2880x2880,1024x5120x2880,16384x32768x64,16384x7168x64"
bash runners/device/run_all.sh \
  matmul_check@fp8tail:${S27_CHECK_S:-75}:--pairs,fp8_e4m3:fp32 \
  kernels_bench@fp8tail:${S27_BENCH_S:-90}:--pair,fp8_e4m3:fp32,--tune-limit,0,--check-candidates,--no-compile,--fused-share,0.1,--seed-tuned,benchmarks/gemm/h100/s26/fp8_all/tuned_configs.json,--only-shapes,${S//,/%2C}
