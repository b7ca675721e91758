#!/usr/bin/env bash
# Valkey 8.1.8 for the test matrix: scripts/servers.sh valkey-8.1 (which
# says where it comes from). Kept under this name for the commands that
# the docs and the benches' comments give.
#
# Usage: scripts/valkey.sh      prints the PATH directory on its last line
set -euo pipefail
exec bash "$(dirname "$0")/servers.sh" valkey-8.1
