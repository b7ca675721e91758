#!/usr/bin/env bash
# Builds the Redis image testcontainers asks for from this machine's Debian
# redis-server, because no container registry is reachable here. The tag is
# "redis:5.0": testcontainers-modules 0.15's Redis module requests that name
# and tag (src/redis/standalone.rs) and waits for "Ready to accept
# connections" on stdout, which redis-server logs there without a config.
#
# It is a FROM scratch image holding the binary, the shared libraries ldd
# names and the dynamic loader. On a machine with a registry, skip this
# script and the stock image is pulled instead.
#
# Usage: scripts/redis-image.sh [--force]   (--force rebuilds an existing image)
set -euo pipefail

IMAGE="${REDIS_IMAGE:-redis:5.0}"
old_id="$(docker image inspect --format '{{.Id}}' "$IMAGE" 2>/dev/null || true)"
if [ -n "$old_id" ] && [ "${1:-}" != "--force" ]; then
  echo "$IMAGE already present (scripts/redis-image.sh --force rebuilds it)"
  exit 0
fi

BIN="$(command -v redis-server || true)"
if [ -z "$BIN" ]; then
  echo "redis-server not found: install it with \`apt-get install redis-server\`" >&2
  exit 1
fi
# Debian's redis-server is a symlink; copy the file it names.
REAL_BIN="$(readlink -f "$BIN")"
if ldd "$REAL_BIN" | grep -q "not found"; then
  ldd "$REAL_BIN" >&2
  echo "$BIN is missing shared libraries" >&2
  exit 1
fi

CONTEXT="$(mktemp -d)"
trap 'rm -rf "$CONTEXT"' EXIT
mkdir -p "$CONTEXT/root/usr/bin" "$CONTEXT/root/tmp" "$CONTEXT/root/data"
cp "$REAL_BIN" "$CONTEXT/root/usr/bin/redis-server"
# Every shared library ("name => /path") and the loader ("/path"), at the
# same paths as on the host, dereferenced so no symlink dangles.
ldd "$REAL_BIN" | awk '$3 ~ /^\// {print $3} $1 ~ /^\// {print $1}' | sort -u | while read -r lib; do
  mkdir -p "$CONTEXT/root$(dirname "$lib")"
  cp -L "$lib" "$CONTEXT/root$lib"
done

# CMD rather than ENTRYPOINT, as in the stock image, so a caller can
# override the command line with ["redis-server", ...].
cat >"$CONTEXT/Dockerfile" <<'DOCKERFILE'
FROM scratch
COPY root/ /
WORKDIR /data
EXPOSE 6379
CMD ["/usr/bin/redis-server", "--bind", "0.0.0.0", "--port", "6379", "--protected-mode", "no", "--save", "", "--appendonly", "no"]
DOCKERFILE

docker build -q -t "$IMAGE" "$CONTEXT" >/dev/null
echo "built $IMAGE from $BIN ($("$BIN" --version | cut -d' ' -f3))"

# A rebuild leaves the previous image untagged: remove it unless a
# container still uses it.
new_id="$(docker image inspect --format '{{.Id}}' "$IMAGE")"
if [ -n "$old_id" ] && [ "$old_id" != "$new_id" ]; then
  docker image rm "$old_id" >/dev/null 2>&1 || true
fi
