#!/usr/bin/env bash
# Run the official MCP conformance suite (server mode) for one requirement revision.
#
#   tests/conformance/run_suite.sh REVISION OUTDIR [--url URL] [--suite SUITE] [--scenario NAME]
#
# REVISION  2025-11-25 or 2026-07-28; the run uses tests/conformance/baseline-REVISION.yml.
# OUTDIR    receives suite.log (the suite's output), server.log and checks/<scenario>/checks.json.
# --url     test a server that is already running (e.g. the hub) instead of starting the fixture.
# --suite   run `--suite SUITE --spec-version REVISION` (e.g. all) instead of `--requirements REVISION`.
# --scenario  run one scenario at REVISION's wire (no baseline; for debugging).
#
# Without --url it starts tests/conformance/fixture_server.py on a free loopback port, waits until
# it answers, runs the suite, and stops it. The exit status is the suite's.
#
# Environment:
#   CONFORMANCE_BIN  command that runs the suite (word-split). Default: the Node 22 wrapper that
#                    scripts/install-test-servers installs (${HANZO_TEST_SERVERS:-.cache/test-servers}/bin/
#                    conformance) if present, else `npx --prefix third_party/npm @modelcontextprotocol/conformance`
#                    (which needs Node >= 22: the suite imports fs.globSync).
#   PYTHON           interpreter for the fixture (default: .venv/bin/python, else python3).
set -euo pipefail

usage() { sed -n '2,21p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"

[[ $# -ge 2 ]] || { usage >&2; exit 2; }
revision="$1"
outdir="$2"
shift 2
url=""
suite=""
scenario=""
while [[ $# -gt 0 ]]; do
    case "$1" in
        --url) url="${2:?--url needs a value}"; shift 2 ;;
        --suite) suite="${2:?--suite needs a value}"; shift 2 ;;
        --scenario) scenario="${2:?--scenario needs a value}"; shift 2 ;;
        -h | --help) usage; exit 0 ;;
        *) echo "run_suite: unknown argument $1" >&2; usage >&2; exit 2 ;;
    esac
done
case "$revision" in
    2025-11-25 | 2026-07-28) ;;
    *) echo "run_suite: unknown revision $revision (want 2025-11-25 or 2026-07-28)" >&2; exit 2 ;;
esac
baseline="$HERE/baseline-$revision.yml"
[[ -f "$baseline" ]] || { echo "run_suite: missing $baseline" >&2; exit 2; }

if [[ -n "${CONFORMANCE_BIN:-}" ]]; then
    read -r -a suite_cmd <<<"$CONFORMANCE_BIN"
elif [[ -x "${HANZO_TEST_SERVERS:-$REPO/.cache/test-servers}/bin/conformance" ]]; then
    suite_cmd=("${HANZO_TEST_SERVERS:-$REPO/.cache/test-servers}/bin/conformance")
else
    suite_cmd=(npx --prefix "$REPO/third_party/npm" @modelcontextprotocol/conformance)
fi
if [[ -z "${PYTHON:-}" ]]; then
    if [[ -x "$REPO/.venv/bin/python" ]]; then PYTHON="$REPO/.venv/bin/python"; else PYTHON=python3; fi
fi

mkdir -p "$outdir"
outdir="$(cd "$outdir" && pwd)"
server_pid=""
# shellcheck disable=SC2317  # invoked from the EXIT trap
cleanup() {
    if [[ -n "$server_pid" ]] && kill -0 "$server_pid" 2>/dev/null; then
        kill "$server_pid" 2>/dev/null || true
        for _ in $(seq 50); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$server_pid" 2>/dev/null || true
    fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Poll until an HTTP server answers at $1 (any status counts), for up to $2 seconds.
wait_for_http() {
    "$PYTHON" - "$1" "$2" <<'PY'
import sys, time, urllib.error, urllib.request

url, deadline = sys.argv[1], time.monotonic() + float(sys.argv[2])
while time.monotonic() < deadline:
    try:
        urllib.request.urlopen(url, timeout=1)
        sys.exit(0)
    except urllib.error.HTTPError:
        sys.exit(0)  # an HTTP error status still means the server is up
    except OSError:
        time.sleep(0.1)
sys.exit(1)
PY
}

if [[ -z "$url" ]]; then
    port="$("$PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
    url="http://127.0.0.1:$port/mcp"
    "$PYTHON" "$HERE/fixture_server.py" --host 127.0.0.1 --port "$port" >"$outdir/server.log" 2>&1 &
    server_pid=$!
    if ! wait_for_http "$url" 30; then
        echo "run_suite: fixture server did not answer at $url; see $outdir/server.log" >&2
        exit 1
    fi
elif ! wait_for_http "$url" 30; then
    echo "run_suite: nothing answers at $url" >&2
    exit 1
fi

if [[ -n "$scenario" ]]; then
    args=(--scenario "$scenario" --spec-version "$revision")
elif [[ -n "$suite" ]]; then
    args=(--suite "$suite" --spec-version "$revision" --expected-failures "$baseline")
else
    args=(--requirements "$revision" --expected-failures "$baseline")
fi
echo "run_suite: ${suite_cmd[*]} server --url $url ${args[*]} -o $outdir/checks" >&2
status=0
"${suite_cmd[@]}" server --url "$url" "${args[@]}" -o "$outdir/checks" >"$outdir/suite.log" 2>&1 || status=$?
if grep -q '=== SUMMARY ===' "$outdir/suite.log"; then
    sed -n '/=== SUMMARY ===/,$p' "$outdir/suite.log"
else
    tail -n 40 "$outdir/suite.log"
fi
echo "run_suite: revision $revision exit $status (log: $outdir/suite.log)" >&2
exit "$status"
