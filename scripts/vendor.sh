#!/usr/bin/env bash
# vendor/ is published crates plus patches: vendor/patches/NAME-VERSION.patch
# holds what this project changed in crate NAME at VERSION, as a git-style
# diff against the crate as published on crates.io, paths relative to the
# crate's root. See vendor/README.md.
#
#   scripts/vendor.sh check   vendor/ is exactly the published crates with
#                             the patches applied, at the versions Cargo.lock
#                             pins (CI runs this)
#   scripts/vendor.sh apply   rebuilds vendor/NAME from the published crate
#                             and its patch, replacing what is there; hunks
#                             that do not fit are left in *.rej files
#   scripts/vendor.sh diff    rewrites each patch from vendor/NAME as it is
#                             now, keeping the patch's description
#
# The published sources come through cargo itself (`cargo fetch` of a
# throwaway manifest that pins the versions, into CARGO_HOME), so this
# works on a fresh machine with nothing but cargo and git.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"

usage() {
  sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}
[ $# -eq 1 ] || usage
mode="$1"
case "$mode" in check | apply | diff) ;; *) usage ;; esac

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

patches=(vendor/patches/*.patch)
[ -e "${patches[0]}" ] || {
  echo "no vendor/patches/*.patch" >&2
  exit 1
}

# NAME and VERSION of each patch; what is built must be that version.
names=()
versions=()
for patch in "${patches[@]}"; do
  base="$(basename "$patch" .patch)"
  name="${base%-*}"
  version="${base##*-}"
  locked="$(awk -v name="$name" '
    $0 == "name = \"" name "\"" { found = 1; next }
    found && /^version = / { gsub(/"/, "", $3); print $3; exit }
  ' Cargo.lock)"
  if [ "$mode" = check ] && [ "$locked" != "$version" ]; then
    echo "$patch is for $name $version, but Cargo.lock pins ${locked:-no $name}:" >&2
    echo "move the patch to the new version (vendor/README.md says how)" >&2
    exit 1
  fi
  names+=("$name")
  versions+=("$version")
done

# The published crates, through a throwaway manifest that pins them.
fetch="$work/fetch"
mkdir -p "$fetch/src"
: >"$fetch/src/lib.rs"
{
  printf '[package]\nname = "vendor-pristine"\nversion = "0.0.0"\nedition = "2021"\npublish = false\n\n'
  printf '[dependencies]\n'
  for i in "${!names[@]}"; do
    printf '%s = { version = "=%s", default-features = false }\n' "${names[$i]}" "${versions[$i]}"
  done
} >"$fetch/Cargo.toml"
host="$(rustc -vV | sed -n 's/^host: //p')"
cargo fetch --quiet --manifest-path "$fetch/Cargo.toml" --target "$host"
cargo_home="${CARGO_HOME:-$HOME/.cargo}"

# Copies crate $1 $2 as published into $3, without cargo's unpacking marker.
published() {
  local source
  source="$(find "$cargo_home"/registry/src -mindepth 2 -maxdepth 2 -type d -name "$1-$2" | head -n 1)"
  if [ -z "$source" ]; then
    echo "cargo fetched $1 $2 but its sources are not under $cargo_home/registry/src" >&2
    exit 1
  fi
  mkdir -p "$(dirname "$3")"
  # Fresh timestamps: cargo must see a rebuilt file as changed.
  cp -R "$source" "$3"
  rm -f "$3/.cargo-ok"
}

# Applies patch $2 inside directory $1 (not a git repository: plain
# files), with git apply's options $3...
apply_patch() {
  local dir="$1" patch="$2"
  shift 2
  (cd "$dir" && GIT_CEILING_DIRECTORIES="$(dirname "$dir")" \
    git apply --whitespace=nowarn -p1 "$@" "$root/$patch")
}

# Removes from $1 (a copy of crate $2) the files git ignores at vendor/$2
# (turmoil ignores its own Cargo.lock): they are in no commit of vendor/.
# (check-ignore exits 1 when it finds none.)
drop_ignored() {
  (cd "$1" && find . -type f -printf '%P\n') \
    | sed "s|^|vendor/$2/|" \
    | { git check-ignore --stdin || [ $? -eq 1 ]; } \
    | sed "s|^vendor/$2/||" \
    | while IFS= read -r ignored; do rm -f "$1/$ignored"; done
}

# Copies the files git sees in vendor/$1 (tracked or not, unless ignored)
# into $2.
vendor_view() {
  mkdir -p "$2"
  # A tracked file deleted from the work tree is listed but not copied.
  (cd "vendor/$1" && git ls-files -z --cached --others --exclude-standard \
    | while IFS= read -r -d '' file; do if [ -e "$file" ]; then printf '%s\0' "$file"; fi; done \
    | xargs -0 --no-run-if-empty cp -a --parents -t "$2")
}

status=0
for i in "${!names[@]}"; do
  name="${names[$i]}"
  version="${versions[$i]}"
  patch="vendor/patches/$name-$version.patch"
  case "$mode" in
    apply)
      rm -rf "vendor/$name"
      published "$name" "$version" "vendor/$name"
      if apply_patch "$root/vendor/$name" "$patch" --reject; then
        echo "vendor/$name: $name $version + $patch"
      else
        echo "vendor/$name: the hunks above did not fit $name $version: make their change by" >&2
        echo "hand (see the *.rej files), delete the *.rej files, then run scripts/vendor.sh diff" >&2
        status=1
      fi
      ;;
    check)
      published "$name" "$version" "$work/expected/$name"
      apply_patch "$work/expected/$name" "$patch"
      drop_ignored "$work/expected/$name" "$name"
      vendor_view "$name" "$work/actual/$name"
      if (cd "$work" && diff -r "expected/$name" "actual/$name") >"$work/diff" 2>&1; then
        echo "ok: vendor/$name is $name $version + $patch"
      else
        echo "FAILED: vendor/$name is not $name $version + $patch:" >&2
        head -n 40 "$work/diff" >&2
        echo "(after changing vendor/$name on purpose, run scripts/vendor.sh diff and commit the patch)" >&2
        status=1
      fi
      ;;
    diff)
      published "$name" "$version" "$work/a"
      drop_ignored "$work/a" "$name"
      vendor_view "$name" "$work/b"
      # The description: everything before the first file's diff.
      header="$(awk '/^diff --git /{ exit } { print }' "$patch")"
      {
        printf '%s\n' "$header"
        # Paths relative to the crate root, a/ and b/ as git writes them.
        # `git diff --no-index` exits 1 when the trees differ, as they do.
        (cd "$work" && git -c core.quotePath=false diff --no-index --no-color --no-ext-diff \
          --src-prefix= --dst-prefix= a b) || [ $? -eq 1 ]
      } >"$work/patch"
      mv "$work/patch" "$patch"
      rm -rf "$work/a" "$work/b"
      echo "$patch: $(grep -c '^diff --git ' "$patch") file(s) changed"
      ;;
  esac
done
exit "$status"
