#!/usr/bin/env bash
# The project's test command (README): installs what it needs, then runs
# every check CI runs, in order. Exits non-zero at the first failure.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n==> %s\n' "$*"; }

step "redis-server, redis-sentinel, redis-cli, system CA roots"
# The topology tests start TLS servers, clusters (created by redis-cli) and
# Sentinel groups; the TLS tests check that the system roots are loaded.
if ! command -v redis-server >/dev/null || ! command -v redis-cli >/dev/null \
  || ! command -v redis-sentinel >/dev/null || [ ! -s /etc/ssl/certs/ca-certificates.crt ]; then
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  $SUDO apt-get update
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y \
    redis-server redis-sentinel redis-tools ca-certificates
fi
redis-server --version

step "Redis image for testcontainers"
if docker info >/dev/null 2>&1; then
  bash scripts/redis-image.sh
else
  echo "docker is not reachable: the benchmarks will fall back to a spawned redis-server"
fi

# The README's doctests need a Redis at REDIS_URL; the integration tests
# start their own servers.
if [ -z "${REDIS_URL:-}" ]; then
  step "redis-server for the README doctests"
  port=$((20000 + RANDOM % 20000))
  # Something answers on this port already: try another.
  while (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do port=$((20000 + RANDOM % 20000)); done
  doctest_redis_dir="$(mktemp -d)"
  redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no \
    --dir "$doctest_redis_dir" --logfile "$doctest_redis_dir/redis.log" &
  doctest_redis_pid=$!
  trap 'kill "$doctest_redis_pid" 2>/dev/null || true; rm -rf "$doctest_redis_dir"' EXIT
  for _ in $(seq 100); do
    if redis-cli -p "$port" ping >/dev/null 2>&1; then break; fi
    sleep 0.1
  done
  if ! redis-cli -p "$port" ping >/dev/null 2>&1; then
    cat "$doctest_redis_dir/redis.log" >&2
    echo "redis-server on port $port did not start" >&2
    exit 1
  fi
  export REDIS_URL="redis://127.0.0.1:$port/"
  echo "REDIS_URL=$REDIS_URL"
fi

step "cargo fmt --check"
cargo fmt --all --check

step "cargo clippy -D warnings"
cargo clippy --workspace --all-targets -- -D warnings

step "lock-core builds without its redis feature"
cargo build -p lock-core --no-default-features

step "lock-core without its redis feature depends on neither tokio nor redis"
# One crate name per line, so a path that happens to contain "redis" (the
# checkout's own directory, say) cannot match.
core_deps="$(cargo tree -p lock-core --no-default-features -e normal --prefix none --format '{p}')"
if forbidden="$(grep -E '^(tokio|redis)' <<<"$core_deps")"; then
  echo "FAILED: lock-core --no-default-features must not depend on tokio or redis, but it pulls in:" >&2
  echo "$forbidden" >&2
  exit 1
fi
echo "ok: neither tokio nor redis"

step "cargo test --workspace"
cargo test --workspace

step "redis-lock-check: the deployment check's command line (feature cli)"
cargo clippy -p lock-core --all-targets --features cli -- -D warnings
cargo test -p lock-core --features cli --test check_cli

step "metrics: every series moves through a lock's life (feature metrics)"
cargo clippy -p lock-core --all-targets --features metrics -- -D warnings
cargo test -p lock-core --features metrics --test metrics

step "cargo test -p lock-core --no-default-features"
cargo test -p lock-core --no-default-features

step "cargo doc -D warnings"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps

step "idle skipping is exact (simulation: every scenario, skipping off and on, same history)"
# The workspace tests ran this with 3 seeds per scenario; CI checks more,
# in release mode (the scenario suite below needs the same dependencies
# built for release anyway; a debug run of these seeds took 6 minutes).
SIM_EQUIVALENCE_SEEDS="${SIM_EQUIVALENCE_SEEDS:-20}" cargo test --release -p sim --test equivalence

step "scenario suite (simulation)"
if compgen -G "scenarios/*.toml" >/dev/null; then
  # The CI seed budget: 1,500 seeds for each scenario (42,000 for the 28
  # files, over 3x the 13,200 before idle skipping, in less time).
  cargo run --release -p sim -- run scenarios/ --seeds "${SIM_CI_SEEDS:-1500}"
else
  echo "SKIPPED: the scenario suite, because scenarios/ holds no *.toml files yet"
fi

step "benchmarks build"
cargo bench --workspace --no-run

step "configuration comparison (quick; its table's shape is checked, not its timings)"
cargo run --release -p bench --bin compare -- --quick --out target/compare.md
rows=$(grep -c '^| ttl' target/compare.md || true)
redlock_rows=$(grep -c '^| Redlock' target/compare.md || true)
if [ "$rows" -lt 4 ] || [ "$redlock_rows" -lt 1 ]; then
  echo "compare --quick produced $rows single-node and $redlock_rows Redlock rows, expected 4 and 1" >&2
  exit 1
fi

step "chaos: scenarios on real processes (single, Sentinel, Cluster; bounded)"
# Real redis-server / redis-sentinel / redis-cli-made cluster processes,
# one OS process per client, the simulator's fault schedules for seeds
# 0..runs-1, the same checkers. Self-contained: move it anywhere after the
# release build of sim. About 2 minutes on 2 cores: every file here is
# safe on real processes, or unsafe and caught on every real run so far
# (see README, "Chaos runs on real processes").
cargo build --release -p sim
./target/release/sim chaos --runs 1 --work-dir target/chaos-work --report-dir target/chaos-reports \
  scenarios/eviction.toml scenarios/long-pause-fenced.toml scenarios/failover-with-wait.toml \
  scenarios/sentinel-stale-primary-wait.toml scenarios/cluster-shard-failover-wait.toml \
  scenarios/redlock-majority-partition.toml

echo
echo "all checks passed"
