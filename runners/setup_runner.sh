#!/usr/bin/env bash
# Register this GPU machine as a fixbits self-hosted runner and install its systemd service.
#
#   sudo bash runners/setup_runner.sh ARCH REPO_URL REGISTRATION_TOKEN
#     ARCH                 sm_90 | sm_100 | sm_103 | gfx942 (a runner class in matrices/pins.yaml)
#     REPO_URL             https://github.com/<owner>/<repo>
#     REGISTRATION_TOKEN   from Settings -> Actions -> Runners -> New self-hosted runner
#   EXTRA_LABELS="cublas-12.8.5" sudo -E bash runners/setup_runner.sh ...   # extra cuBLAS versions installed here
#
# Preconditions (see runners/README.md): the GitHub Actions runner unpacked in /opt/actions-runner,
# the GPU driver and CUDA or ROCm installed, python3 with torch, triton, pytest, pytest-xdist, pyyaml,
# numpy, ml_dtypes, junitparser, hypothesis. The script refuses to register a machine that fails
# runners/check_runner.py, so a runner never comes online with the wrong GPU or an unpinned stack.
set -euo pipefail

if [ "$#" -ne 3 ]; then
  sed -n '2,14p' "$0" >&2
  exit 2
fi
ARCH=$1 URL=$2 TOKEN=$3
REPO_DIR=$(cd "$(dirname "$0")/.." && pwd)
RUNNER_DIR=/opt/actions-runner
RUNNER_USER=fixbits

# labels from pins.yaml (self-hosted, linux, x64 are added by the runner itself)
LABELS=$(PYTHONPATH="$REPO_DIR" python3 - "$ARCH" "$REPO_DIR/matrices/pins.yaml" <<'PY'
import sys
from fixbits.gate import load_pins
arch, pins_file = sys.argv[1], sys.argv[2]
pins = load_pins(pins_file)
runner = {r.arch: r for r in pins.runners}.get(arch)
if runner is None:
    sys.exit(f"no runner class {arch!r} in matrices/pins.yaml; known: {', '.join(r.arch for r in pins.runners)}")
print(",".join(l for l in runner.labels if l not in ("self-hosted", "linux", "x64")))
PY
)
if [ -n "${EXTRA_LABELS:-}" ]; then LABELS="$LABELS,$EXTRA_LABELS"; fi
echo "runner labels: self-hosted,linux,x64,$LABELS"

id -u "$RUNNER_USER" >/dev/null 2>&1 || useradd --system --create-home --shell /usr/sbin/nologin "$RUNNER_USER"
case "$ARCH" in
  gfx*) usermod -aG render,video "$RUNNER_USER" ;;  # /dev/kfd and /dev/dri for ROCm
  *) ;;
esac

echo "== readiness check as $RUNNER_USER (the same one the service runs before each start)"
sudo -u "$RUNNER_USER" env PYTHONPATH="$REPO_DIR" python3 "$REPO_DIR/runners/check_runner.py" --arch "$ARCH" --print

[ -x "$RUNNER_DIR/config.sh" ] || { echo "no GitHub runner in $RUNNER_DIR (see runners/README.md)" >&2; exit 1; }
chown -R "$RUNNER_USER:$RUNNER_USER" "$RUNNER_DIR"
sudo -u "$RUNNER_USER" "$RUNNER_DIR/config.sh" --unattended --url "$URL" --token "$TOKEN" \
  --name "$(hostname)-$ARCH" --labels "$LABELS" --work _work --replace

cat > /etc/fixbits-runner.env <<ENV
FIXBITS_RUNNER_ARCH=$ARCH
FIXBITS_REPO=$REPO_DIR
ENV
install -m 0644 "$REPO_DIR/runners/systemd/fixbits-runner.service" /etc/systemd/system/fixbits-runner.service
systemctl daemon-reload
systemctl enable --now fixbits-runner.service
systemctl --no-pager status fixbits-runner.service | head -n 5
