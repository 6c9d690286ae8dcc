# Sourced by quickstart.sh and test.sh: make (once) and enter .venv with everything installed.
# A machine that already has torch (a GPU box) keeps it: the venv sees the system's packages.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${STREAMK_PGAS_VENV:-$ROOT/.venv}"
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv --system-site-packages "$VENV"
fi
# shellcheck disable=SC1091
. "$VENV/bin/activate"
if ! python -c "import torch" 2>/dev/null; then
  # No torch yet: take the CPU build (a CUDA build is several GB and needs no GPU here).
  pip install -q "torch==2.13.0" 2>/dev/null || pip install -q torch --index-url https://download.pytorch.org/whl/cpu
fi
EXTRAS="${1:-}"
stamp="$VENV/.streamk_pgas_installed${EXTRAS:+_$EXTRAS}"
if [ ! -f "$stamp" ] || [ "$ROOT/pyproject.toml" -nt "$stamp" ] || [ "$ROOT/setup.py" -nt "$stamp" ]; then
  pip install -q -e "$ROOT${EXTRAS:+[$EXTRAS]}"
  touch "$stamp"
fi
if ! python -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
  export TRITON_INTERPRET=1  # no GPU: Triton's interpreter runs the kernels on the CPU
fi
MPIRUN=(mpirun)
if [ "$(id -u)" = 0 ]; then MPIRUN+=(--allow-run-as-root); fi
if [ "${TRITON_INTERPRET:-0}" = 1 ]; then MPIRUN+=(--oversubscribe); fi
cd "$ROOT"
