#!/usr/bin/env bash
# Runs every cargo-fuzz target (or those named in FUZZ_TARGETS) for FUZZ_SECONDS each, one after
# another on one core, niced; prints per target the inputs executed, execs/s, coverage and whether
# libFuzzer found anything, and exits non-zero if any target crashed, leaked, hung or ran out of
# memory. `make fuzz` calls this; docs/fuzzing.md says why it looks the way it does.
#
# Stable Rust is enough: cargo-fuzz passes -Zsanitizer and other -Z flags, which a stable rustc
# accepts under RUSTC_BOOTSTRAP=1. AddressSanitizer works that way (the stable toolchain ships its
# runtime), so it stays cargo-fuzz's default; FUZZ_SANITIZER=none trades it for speed.
set -euo pipefail

FUZZ_SECONDS=${FUZZ_SECONDS:-60}
FUZZ_SANITIZER=${FUZZ_SANITIZER:-address}
# libFuzzer's own per-input limit is 1200 s; a parser that takes 10 s on one datagram is a hang.
FUZZ_TIMEOUT=${FUZZ_TIMEOUT:-10}
CARGO_FUZZ_VERSION=0.13.2

cd "$(dirname "$0")"
export RUSTC_BOOTSTRAP=1

if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "installing cargo-fuzz $CARGO_FUZZ_VERSION (crates.io)"
    cargo install cargo-fuzz --version "=$CARGO_FUZZ_VERSION" --locked
fi

targets=${FUZZ_TARGETS:-$(cargo fuzz list)}
logs=target/logs
mkdir -p "$logs"

for t in $targets; do
    echo "building $t (sanitizer: $FUZZ_SANITIZER)"
    nice -n 19 cargo fuzz build --sanitizer "$FUZZ_SANITIZER" "$t"
done

failed=0
summary=()
for t in $targets; do
    mkdir -p "corpus/$t" "artifacts/$t"
    log="$logs/$t.log"
    echo "fuzzing $t for ${FUZZ_SECONDS}s (corpus fuzz/corpus/$t, log fuzz/$log)"
    # One process, no -jobs/-workers: one core. Corpus and artifacts go to cargo-fuzz's defaults,
    # fuzz/corpus/<target> and fuzz/artifacts/<target>, so the next run resumes from this one's corpus.
    rc=0
    start=$SECONDS
    nice -n 19 cargo fuzz run --sanitizer "$FUZZ_SANITIZER" "$t" -- \
        -max_total_time="$FUZZ_SECONDS" -timeout="$FUZZ_TIMEOUT" -print_final_stats=1 \
        >"$log" 2>&1 || rc=$?
    wall=$((SECONDS - start))
    execs=$(grep -oP 'stat::number_of_executed_units:\s*\K[0-9]+' "$log" | tail -n1 || true)
    rate=$(grep -oP 'stat::average_exec_per_sec:\s*\K[0-9]+' "$log" | tail -n1 || true)
    cov=$(grep -oP '^#[0-9]+\s+\w+\s+cov: \K[0-9]+ ft: [0-9]+' "$log" | tail -n1 || true)
    if [ "$rc" -eq 0 ]; then
        found="nothing found"
    else
        failed=1
        artifact=$(grep -oP 'Test unit written to \K\S+' "$log" | tail -n1 || true)
        found="FOUND (exit $rc): ${artifact:-no artifact written, see fuzz/$log}"
        tail -n 40 "$log" >&2
    fi
    summary+=("$(printf '%-10s %12s execs %8s execs/s %6ss  cov: %-16s %s' \
        "$t" "${execs:-?}" "${rate:-?}" "$wall" "${cov:-?}" "$found")")
done

echo
echo "fuzz summary (${FUZZ_SECONDS}s per target, sanitizer $FUZZ_SANITIZER):"
printf '  %s\n' "${summary[@]}"
exit "$failed"
