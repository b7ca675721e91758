#!/bin/sh
# Runs a command in one regime of the machine (bench/README.md, "Regimes"):
#   bench/regime.sh idle -- COMMAND...   the machine left alone
#   bench/regime.sh busy -- COMMAND...   one `nice -n 19` spinning shell per
#                                        core for the command's whole run
# The spinners are killed when the command ends, on Ctrl-C too, and each
# exits by itself once this script is gone (even after `kill -9`).
# `cargo bench -p bench --bench hotpath` switches regimes itself, round by
# round; this is for the other benches, `compare` and the `cycles` example.
set -eu

usage() {
  echo "usage: $0 idle|busy -- COMMAND..." >&2
  exit 2
}

[ $# -ge 3 ] || usage
regime=$1
shift
[ "$1" = "--" ] || usage
shift

pids=""
cleanup() {
  for pid in $pids; do
    kill "$pid" 2>/dev/null || true
  done
  for pid in $pids; do
    wait "$pid" 2>/dev/null || true
  done
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

case "$regime" in
  idle) ;;
  busy)
    cores=$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2)
    me=$$
    i=0
    while [ "$i" -lt "$cores" ]; do
      nice -n 19 sh -c "while kill -0 $me 2>/dev/null; do i=0; \
        while [ \$i -lt 5000 ]; do i=\$((i+1)); done; done" &
      pids="$pids $!"
      i=$((i + 1))
    done
    ;;
  *) usage ;;
esac

echo "regime: $regime ($(cut -d' ' -f1-3 /proc/loadavg) load average at start)" >&2
status=0
"$@" || status=$?
exit "$status"
