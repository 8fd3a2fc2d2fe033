#!/usr/bin/env bash
# One device call runs several device scripts in turn, each under its own time budget, and
# packs every result into one archive (the device tool returns at most 8 files).
# usage: bash runners/device/run_all.sh name:budget_s [name:budget_s ...]   (OUT must be set)
set -u
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site:$PWD
else
  export PYTHONPATH=$PWD
fi
export PYTHONUNBUFFERED=1
R=/tmp/fixbits_results; mkdir -p "$R"
start=$(date +%s)
for spec in "$@"; do
  name=${spec%%:*}; budget=${spec##*:}
  t0=$(date +%s)
  timeout $((budget + 90)) python3 "runners/device/$name.py" --out "$R/$name" --budget-s "$budget" > "$R/$name.log" 2>&1
  rc=$?
  echo "=== $name rc=$rc wall=$(( $(date +%s) - t0 ))s"
  tail -n 30 "$R/$name.log" | cut -c1-220
  tar czf "$OUT/results.tgz" -C "$R" .
done
echo "total wall $(( $(date +%s) - start ))s"
