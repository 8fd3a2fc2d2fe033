#!/usr/bin/env bash
# Session 28, first call. On an H200 (issue 4's target card): session 24's H200 plan (fused-pair
# bytes of 16x4096x4096, then the whole fp16 table). On any other card: the whole fp8 table on the
# session-27 body (split-K parts with TMA + swap, tail by TMA zero-fill), seeded with session 26's
# winners and session 27's re-timed ones, every tuning candidate's bytes compared with cuBLASLt's;
# then fp8 matmul_check and the GPU suite's every-config test for fp8 and split-K, which also run
# the review pass's tail edit (0d476d3) on a GPU for the first time.
set -u
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)
echo "=== card: $gpu"
if [[ "$gpu" == *H200* ]]; then
  S24_BENCH_S=${S28_BENCH_S:-400} bash runners/device/s24_plan.sh
  exit 0
fi
bash runners/device/run_all.sh \
  kernels_bench@fp8all:${S28_BENCH_S:-250}:--pair,fp8_e4m3:fp32,--tune-limit,3,--check-candidates,--no-compile,--seed-tuned,benchmarks/gemm/h100/s26/fp8_all/tuned_configs.json,benchmarks/gemm/h100/s27/fp8_tail/tuned_configs.json \
  matmul_check@fp8:${S28_CHECK_S:-70}:--pairs,fp8_e4m3:fp32
export PYTHONPATH=/tmp/site:$PWD
timeout "${S28_SUITE_S:-150}" python3 -m pytest -p no:cacheprovider -q -n 8 --arch sm_90 \
  suites/reconstruction/test_kernels_gpu.py -k "every_config and (fp8 or splitk)" \
  --junitxml="$OUT/suite_every_config.xml" > "$OUT/suite_every_config.log" 2>&1
echo "=== suite rc=$?"; tail -n 15 "$OUT/suite_every_config.log" | cut -c1-220
