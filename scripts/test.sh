#!/usr/bin/env bash
# The project's test command (README): installs what it needs, then runs
# every check CI runs. Exits non-zero at the first failure.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n==> %s\n' "$*"; }

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

step "redis-server"
if ! command -v redis-server >/dev/null 2>&1; then
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq redis-server >/dev/null
fi
redis-server --version

step "redis image for testcontainers"
if docker info >/dev/null 2>&1; then
  if [ -x scripts/redis-image.sh ]; then bash scripts/redis-image.sh; fi
else
  echo "docker is not reachable: benchmarks will fall back to a spawned redis-server"
fi

# A Redis for the README doctests (integration tests start their own).
if [ -z "${REDIS_URL:-}" ]; then
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --daemonize yes \
    --pidfile "/tmp/redis-lock-test-$port.pid" >/dev/null
  trap 'kill "$(cat /tmp/redis-lock-test-'"$port"'.pid)" 2>/dev/null || true' EXIT
  export REDIS_URL="redis://127.0.0.1:$port/"
fi

step "cargo fmt --check"
cargo fmt --all --check

step "cargo clippy -D warnings"
cargo clippy --workspace --all-targets -- -D warnings

step "lock-core without tokio or redis"
cargo build -p lock-core --no-default-features
if cargo tree -p lock-core --no-default-features -e normal | grep -E "tokio|redis"; then
  echo "lock-core --no-default-features must not depend on tokio or redis" >&2
  exit 1
fi
cargo test -p lock-core --no-default-features

step "cargo test --workspace"
cargo test --workspace

step "cargo doc"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps

step "scenario suite (simulation)"
if compgen -G "scenarios/*.toml" >/dev/null; then
  # The CI seed budget: 600 seeds for each scenario (over 10,000 in all).
  cargo run --release -p sim -- run scenarios/ --seeds "${SIM_CI_SEEDS:-600}"
else
  echo "no scenario files yet"
fi

step "benchmarks build"
cargo bench --workspace --no-run

echo
echo "all checks passed"
