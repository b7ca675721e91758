#!/usr/bin/env bash
# Does a server's `WAITAOF 1 0` wait for the fsync? A probe, as in
# docs/operations.md ("Durability across restarts"): start the server with
# `appendfsync everysec` and the chaos mode's lazy_aof preloaded (a
# `kill -9` then loses what no fsync covered, as a machine crash does), send
# `SET k v` and `WAITAOF 1 0 0` on one connection, kill it at once, start it
# again on the same AOF and read k back. An acknowledged key that is gone
# was acknowledged before its fsync.
#
# Usage: scripts/waitaof-probe.sh SERVER [TRIES]
#   SERVER   a redis-server or valkey-server binary
#            (target/servers/FLAVOUR/path/redis-server after scripts/servers.sh)
#   TRIES    default 30
# Needs redis-cli on PATH and a built sim (the library is built by
# sim/build.rs; LAZY_AOF=FILE names it directly).
set -euo pipefail
server="$1"; tries="${2:-30}"
lib="${LAZY_AOF:-$(find "${CARGO_TARGET_DIR:-target}" -name liblazy_aof.so -path '*/build/sim-*' 2>/dev/null | head -n 1)}"
if [ -z "$lib" ] || [ ! -f "$lib" ]; then
  echo "liblazy_aof.so not found: build sim first (cargo build -p sim), or set LAZY_AOF=FILE" >&2
  exit 2
fi
port=$((20000 + RANDOM % 10000))
lost=0 acked=0
dir="$(mktemp -d)"
trap 'kill -9 "${pid:-0}" 2>/dev/null || true; rm -rf "$dir"' EXIT
start() {
  LD_PRELOAD="$lib" "$server" --port "$port" --bind 127.0.0.1 --dir "$dir" --save "" \
    --appendonly yes --appendfsync everysec --logfile "$dir/log" &
  pid=$!
  for _ in $(seq 200); do
    if redis-cli -p "$port" ping 2>/dev/null | grep -q PONG; then return; fi
    sleep 0.02
  done
  echo "the server did not start: $(tail -n 5 "$dir/log")" >&2
  exit 1
}
for i in $(seq "$tries"); do
  rm -rf "${dir:?}"/*
  start
  # A random point between two once-a-second fsyncs.
  sleep "0.$((RANDOM % 9 + 1))"
  t0=$(date +%s%N)
  reply="$(printf 'SET k v%s\nWAITAOF 1 0 0\n' "$i" | redis-cli -p "$port")"
  t1=$(date +%s%N)
  kill -9 "$pid"; wait "$pid" 2>/dev/null || true
  ack="$(sed -n 2p <<<"$reply")"
  start
  for _ in $(seq 200); do
    value="$(redis-cli -p "$port" get k 2>&1)"
    [[ "$value" == *LOADING* ]] || break
    sleep 0.02
  done
  kill -9 "$pid"; wait "$pid" 2>/dev/null || true
  if [ "$ack" = 1 ]; then acked=$((acked + 1)); fi
  if [ "$ack" = 1 ] && [ "$value" != "v$i" ]; then lost=$((lost + 1)); fi
  echo "try $i: WAITAOF local count $ack, answered $(((t1 - t0) / 1000000)) ms after the SET was sent (with redis-cli's start); after the crash k = '$value'"
done
echo "$("$server" --version | head -n 1)"
echo "acknowledged $acked of $tries; acknowledged and lost in the crash: $lost"
