#!/usr/bin/env bash
# Session 26, last call: fixbits.matmul's fp8 bytes with the K-major winners as class defaults
# (matmul_check, B row-major and K-major), then every tuning candidate timed on the 64 fp8 shapes
# above 5 GFLOP that fp8_all (--tune-limit 3) found slowest, seeded with its winners.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
R=/tmp/s26; mkdir -p $R
timeout 130 python3 runners/device/matmul_check.py --out $R/matmul_check_fp8_defaults --budget-s 100 \
  --pairs fp8_e4m3:fp32 > $R/matmul_check_fp8_defaults.log 2>&1
tail -n 4 $R/matmul_check_fp8_defaults.log | cut -c1-300
timeout 400 python3 runners/device/kernels_bench.py --out $R/fp8_slow64 --budget-s ${S26_SLOW_S:-330} \
  --pair fp8_e4m3:fp32 --tune-limit 0 --check-candidates --no-compile \
  --seed-tuned benchmarks/gemm/h100/s26/fp8_all/tuned_configs.json \
  --only-shapes "$(cat benchmarks/gemm/h100/s26/fp8_slow64.txt)" > $R/fp8_slow64.log 2>&1
grep -E 'ALL|bytes|total' $R/fp8_slow64.log | cut -c1-300
tar czf "$OUT/s26_slow.tgz" -C $R .
