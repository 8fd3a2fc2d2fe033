#!/usr/bin/env bash
# Session 36's device call, chosen by card. On an H200 (issue 4's target card): issue 4's benchmark
# (session 31's H200 plan; H200_BENCH_S sets its budget). On an H100: issue 3's phase B on the
# answers of n15's H200 fuzz cells that no profile covers (223 keys, both narrow pairs), now that
# the emulator's fma chains are fast enough for the deep-K GEMV answers (S36_PHASEB_S, per pair).
set -u
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)
echo "=== card: $gpu"
if [[ "$gpu" == *H200* ]]; then
  H200_BENCH_S=${H200_BENCH_S:-300} bash runners/device/s31b_plan.sh
else
  b=${S36_PHASEB_S:-150}
  bash runners/device/run_all.sh \
    reconstruct@phaseb10:$b:--pairs,fp16:fp16,--seed-profiles,matrices/profiles,--fuzz,2000,--narrow-sweep,none,--sweep-share,0.03,--per-answer-s,100,@benchmarks/reconstruction/h100/s36/phaseb_targets_n15_s36.args \
    reconstruct@phaseb11:$b:--pairs,bf16:bf16,--seed-profiles,matrices/profiles,--fuzz,2000,--narrow-sweep,none,--sweep-share,0.03,--per-answer-s,100,@benchmarks/reconstruction/h100/s36/phaseb_targets_n15_s36.args
fi
