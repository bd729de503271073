# Sourced by scripts/*: make sure .venv exists with the project and its dev tools installed.
# Re-installs only when pyproject.toml changed (stamp file), so repeated runs start fast.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${HANZO_VENV:-$ROOT/.venv}"
PY=python3
if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV"
  "$VENV/bin/python" -m pip install -qq --upgrade pip
fi
stamp="$VENV/.hanzo-stamp"
want="$(sha256sum "$ROOT/pyproject.toml" | cut -d' ' -f1)-${1:-dev}"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  if [ "${1:-dev}" = "dev" ]; then
    "$VENV/bin/python" -m pip install -qq -e "$ROOT[dev,routing,selection,docker,servers]"
  else
    "$VENV/bin/python" -m pip install -qq -e "$ROOT[routing,selection,docker,servers]"
  fi
  echo "$want" >"$stamp"
fi
export PATH="$VENV/bin:$PATH"
