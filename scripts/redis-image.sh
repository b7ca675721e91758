#!/usr/bin/env bash
# Builds the Redis image testcontainers asks for ("redis:5.0", the tag the
# testcontainers-modules Redis module requests) from this machine's Debian
# redis-server, because no container registry is reachable here. It is a
# FROM scratch image holding the binary, the shared libraries ldd names and
# the dynamic loader. On a machine with a registry, skip this script and
# the stock image is pulled instead.
#
# Usage: scripts/redis-image.sh [--force]
set -euo pipefail

IMAGE="${REDIS_IMAGE:-redis:5.0}"
if [ "${1:-}" != "--force" ] && docker image inspect "$IMAGE" >/dev/null 2>&1; then
  echo "$IMAGE already present"
  exit 0
fi

BIN="$(command -v redis-server || true)"
if [ -z "$BIN" ]; then
  echo "redis-server not found: apt-get install redis-server" >&2
  exit 1
fi
BIN="$(readlink -f "$BIN")"

CONTEXT="$(mktemp -d)"
trap 'rm -rf "$CONTEXT"' EXIT
mkdir -p "$CONTEXT/root/usr/bin" "$CONTEXT/root/tmp" "$CONTEXT/root/data"
cp "$BIN" "$CONTEXT/root/usr/bin/redis-server"
# Every shared library and the loader, at the same paths as on the host.
ldd "$BIN" | awk '$3 ~ /^\// {print $3} $1 ~ /^\// {print $1}' | sort -u | while read -r lib; do
  mkdir -p "$CONTEXT/root$(dirname "$lib")"
  cp -L "$lib" "$CONTEXT/root$lib"
done

cat > "$CONTEXT/Dockerfile" <<'DOCKERFILE'
FROM scratch
COPY root/ /
WORKDIR /data
EXPOSE 6379
ENTRYPOINT ["/usr/bin/redis-server", "--bind", "0.0.0.0", "--protected-mode", "no", "--save", "", "--appendonly", "no"]
DOCKERFILE

docker build -q -t "$IMAGE" "$CONTEXT" >/dev/null
echo "built $IMAGE from $BIN"
