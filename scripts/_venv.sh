# Sourced by scripts/*: make sure .venv exists with the project and its dev tools installed.
# Re-installs only when pyproject.toml or constraints.txt changed (stamp file), so repeated runs start fast.
# constraints.txt (written by scripts/lock) pins every package, so a fresh machine gets the versions the tests
# passed with and pip never has to backtrack; a download cut short is retried.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${HANZO_VENV:-$ROOT/.venv}"
PY=python3
if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV"
  "$VENV/bin/python" -m pip install -qq --upgrade pip
fi
stamp="$VENV/.hanzo-stamp"
want="$(cat "$ROOT/pyproject.toml" "$ROOT/constraints.txt" | sha256sum | cut -d' ' -f1)-${1:-dev}"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  extras="routing,selection,docker,servers"
  [ "${1:-dev}" = "dev" ] && extras="dev,$extras"
  for attempt in 1 2 3; do
    if PIP_DISABLE_PIP_VERSION_CHECK=1 "$VENV/bin/python" -m pip install -qq --retries 10 --timeout 60 \
      -c "$ROOT/constraints.txt" -e "$ROOT[$extras]"; then
      break
    fi
    [ "$attempt" -eq 3 ] && exit 1
    echo "_venv.sh: pip install failed (attempt $attempt of 3); retrying in 10 s" >&2
    sleep 10
  done
  echo "$want" >"$stamp"
  export HANZO_INSTALLED=1  # for scripts/run: this run installed or updated the project
fi
export PATH="$VENV/bin:$PATH"
