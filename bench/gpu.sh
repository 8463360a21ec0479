#!/usr/bin/env bash
# GPU checks and benchmarks as one script, for an accelerator machine lent for a few minutes.
#
#   bench/gpu.sh                 # on the accelerator: contract tests + GPU-sized benches,
#                                # writes bench/results_gpu.md (~8 minutes on one H200)
#   bench/gpu.sh --dry-run       # the same steps at quick sizes on CPU (the test suite runs this)
#   bench/gpu.sh --only etd shs  # only these benches
#   bench/gpu.sh --tests EXPR    # only the contract tests matching a pytest -k expression
#
# Each step runs under its own time limit and every bench module is guarded by bench/run.py, so
# one failure or a slow case does not lose the rest; the exit status says whether all passed.
set -uo pipefail
cd "$(dirname "$0")/.."

dry_run=0
only=()
tests_expr=""
while [ $# -gt 0 ]; do
  case "$1" in
    --dry-run) dry_run=1; shift ;;
    --tests) tests_expr="$2"; shift 2 ;;
    --only) shift; while [ $# -gt 0 ] && [ "${1#--}" = "$1" ]; do only+=("$1"); shift; done ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done

if [ "$dry_run" = 1 ]; then
  export JAX_PLATFORMS=cpu
  size=quick
  out="$(mktemp -d)/results_gpu_dry_run.md"
  # a rehearsal on a possibly busy 2-core host: no device time is at stake, so the limits are
  # sized for a loaded machine (the contract step took over 300 s at load 13)
  test_limit=900; bench_limit=600
else
  size=gpu
  out=bench/results_gpu.md
  test_limit=180; bench_limit=330
fi

status=0
echo "== device"
python - <<'PY' || status=1
import jax
for device in jax.devices():
    stats = {}
    try:
        stats = device.memory_stats() or {}
    except Exception:  # CPU devices have no memory statistics
        pass
    limit = stats.get("bytes_limit")
    memory = f", {limit / 2**30:.1f} GiB" if limit else ""
    print(f"{device.platform}:{device.id} {device.device_kind}{memory}")
print(f"jax {jax.__version__}, backend {jax.default_backend()}, {jax.device_count()} device(s)")
PY

echo "== contract registry on the default device (float32, and float64 where an entry asks)"
test_args=(-q -p no:cacheprovider tests/test_contract.py)
[ -n "$tests_expr" ] && test_args+=(-k "$tests_expr")
timeout "$test_limit" python -m pytest "${test_args[@]}" || { echo "contract tests: FAILED or timed out"; status=1; }

echo "== benchmarks at size $size -> $out"
bench_args=(--size "$size" --out "$out")
[ ${#only[@]} -gt 0 ] && bench_args+=(--only "${only[@]}")
timeout "$bench_limit" python bench/run.py "${bench_args[@]}" || { echo "benchmarks: a module FAILED or timed out (see $out)"; status=1; }

echo "== done (status $status); results in $out"
exit "$status"
