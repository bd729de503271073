#!/usr/bin/env bash
# Run the official MCP conformance suite in CLIENT mode against the hub's downstream client side.
#
#   tests/conformance/run_client_suite.sh REVISION OUTDIR [--scenario NAME] [--timeout MS]
#
# REVISION  2025-11-25 or 2026-07-28; the run is `--requirements REVISION` with
#           tests/conformance/client-baseline-REVISION.yml as its expected failures.
# OUTDIR    receives suite.log (the suite's output) and checks/<scenario>/{checks.json,stdout.txt,stderr.txt}.
# --scenario  run one scenario at REVISION's wire instead (no baseline; for debugging).
# --timeout   per-scenario client timeout in ms (default 120000: the suite starts every scenario's client at
#             once, and on a small machine 30 Python processes starting together exceed the suite's 30 s default).
#
# For each scenario the suite starts a mock server and runs tests/conformance/client.py <url>, which opens a hub
# whose only downstream is that URL and acts as the scenario's client through it. The exit status is the suite's.
#
# Environment:
#   CONFORMANCE_BIN  command that runs the suite (word-split); default as in run_suite.sh.
#   PYTHON           interpreter for client.py (default: .venv/bin/python, else python3). No spaces in its path:
#                    the suite splits --command on spaces.
set -euo pipefail

usage() { sed -n '2,19p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"

[[ $# -ge 2 ]] || { usage >&2; exit 2; }
revision="$1"
outdir="$2"
shift 2
scenario=""
timeout_ms=120000
while [[ $# -gt 0 ]]; do
    case "$1" in
        --scenario) scenario="${2:?--scenario needs a value}"; shift 2 ;;
        --timeout) timeout_ms="${2:?--timeout needs a value}"; shift 2 ;;
        -h | --help) usage; exit 0 ;;
        *) echo "run_client_suite: unknown argument $1" >&2; usage >&2; exit 2 ;;
    esac
done
case "$revision" in
    2025-11-25 | 2026-07-28) ;;
    *) echo "run_client_suite: unknown revision $revision (want 2025-11-25 or 2026-07-28)" >&2; exit 2 ;;
esac
baseline="$HERE/client-baseline-$revision.yml"
[[ -f "$baseline" ]] || { echo "run_client_suite: missing $baseline" >&2; exit 2; }

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
if [[ "$PYTHON$HERE" == *" "* ]]; then
    echo "run_client_suite: the suite splits --command on spaces; '$PYTHON' and '$HERE' must not contain any" >&2
    exit 2
fi
client_cmd="$PYTHON $HERE/client.py"

mkdir -p "$outdir"
outdir="$(cd "$outdir" && pwd)"

if [[ -n "$scenario" ]]; then
    args=(--scenario "$scenario" --spec-version "$revision")
else
    args=(--requirements "$revision" --expected-failures "$baseline")
fi
echo "run_client_suite: ${suite_cmd[*]} client --command '$client_cmd' ${args[*]} -o $outdir/checks" >&2
status=0
(cd "$REPO" && "${suite_cmd[@]}" client --command "$client_cmd" "${args[@]}" --timeout "$timeout_ms" \
    -o "$outdir/checks") >"$outdir/suite.log" 2>&1 || status=$?
if grep -q '=== SUITE SUMMARY ===' "$outdir/suite.log"; then
    sed -n '/=== SUITE SUMMARY ===/,$p' "$outdir/suite.log"
else
    tail -n 40 "$outdir/suite.log"
fi
echo "run_client_suite: revision $revision exit $status (log: $outdir/suite.log)" >&2
exit "$status"
