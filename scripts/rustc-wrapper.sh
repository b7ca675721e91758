#!/usr/bin/env bash
# scripts/test.sh's RUSTC_WORKSPACE_WRAPPER: cargo runs it, for the
# workspace's own crates only, as `rustc-wrapper.sh RUSTC ARGS...`.
#
# 1. clippy-driver compiles the crate (CLIPPY_DRIVER), linting it with
#    CLIPPY_ARGS as it does, so linting costs no second compilation.
# 2. Then, for a library or binary (not a test harness, not a build
#    script), rustdoc documents it from the same arguments with
#    -D warnings. It reads the dependencies' metadata from the build's own
#    artifacts (the --extern files rustc just used): `cargo doc` would
#    compile every dependency a second time, in check mode, for that
#    metadata (about 200 CPU-seconds of a CI run).
#
# Set RUSTDOC_CHECK=0 to skip step 2. The documentation it writes goes to
# RUSTDOC_CHECK_OUT (default: a directory under the crate's --out-dir).
set -euo pipefail

rustc="$1"
shift
"${CLIPPY_DRIVER:?CLIPPY_DRIVER: the clippy-driver to compile with}" "$rustc" "$@"

[ "${RUSTDOC_CHECK:-1}" = 1 ] || exit 0

# Queries (`rustc -vV`, `--print ...`) and anything without a source file
# document nothing.
args=()
source_file=""
crate_name=""
crate_type=""
out_dir=""
is_test=0
while [ $# -gt 0 ]; do
  arg="$1"
  shift
  case "$arg" in
    --test) is_test=1 ;;
    --print | --print=*) exit 0 ;;
    --crate-name) crate_name="$1"; args+=("$arg" "$1"); shift ;;
    --crate-type) crate_type="$1"; args+=("$arg" "$1"); shift ;;
    --out-dir) out_dir="$1"; shift ;;
    --emit=* | --diagnostic-width=* | --json=* | --error-format=*) ;;
    --emit | --diagnostic-width | --json | --error-format) shift ;;
    # Code generation options: none changes what rustdoc reads, save the
    # cfg that debug assertions set.
    -C)
      case "$1" in
        debug-assertions*) args+=("$arg" "$1") ;;
      esac
      shift
      ;;
    -C*) case "$arg" in -Cdebug-assertions*) args+=("$arg") ;; esac ;;
    --edition | --cfg | --check-cfg | -L | --extern | --target | --cap-lints \
      | -W | -A | -D | -F | --warn | --allow | --deny | --forbid | --force-warn)
      args+=("$arg" "$1")
      shift
      ;;
    --edition=* | --cfg=* | --check-cfg=* | -L* | --extern=* | --target=* | --cap-lints=* \
      | -W* | -A* | -D* | -F* | --warn=* | --allow=* | --deny=* | --forbid=* | --force-warn=*)
      args+=("$arg")
      ;;
    -*) ;;
    *.rs) source_file="$arg" ;;
    *) ;;
  esac
done

if [ "$is_test" = 1 ] || [ -z "$source_file" ] || [ "$crate_name" = build_script_build ]; then
  exit 0
fi
case "$crate_type" in
  lib | rlib | bin) ;;
  *) exit 0 ;;
esac
# What `cargo doc` documents: libraries and binaries, not the benchmarks,
# examples and tests that build as binaries.
case "$source_file" in
  benches/* | */benches/* | examples/* | */examples/* | tests/* | */tests/*) exit 0 ;;
esac

doc_out="${RUSTDOC_CHECK_OUT:-${out_dir:-.}/../doc-check}"
rustdoc="$(dirname "$rustc")/rustdoc"
[ -x "$rustdoc" ] || rustdoc=rustdoc
exec "$rustdoc" "${args[@]}" "$source_file" -o "$doc_out" -D warnings
