#!/usr/bin/env bash
# Rebuilds vendor/lapin and vendor/amq-protocol-types from their crates.io releases and the patch
# series of patches/<crate>/ (one change a file, applied in order; the table of them is
# patches/<crate>/PATCHED.md, copied beside the sources).
#
#   bash scripts/vendor.sh            rewrites vendor/
#   bash scripts/vendor.sh DIR        writes DIR/lapin and DIR/amq-protocol-types instead
#
# The releases are downloaded once into ${VENDOR_CACHE:-~/.cache/rabbit-retry/crates} and checked
# against their sha256. Each patch must apply exactly (no fuzz, no offset warnings ignored).
set -euo pipefail
cd "$(dirname "$0")/.."

out=${1:-vendor}
cache=${VENDOR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rabbit-retry/crates}

# name version sha256 of the .crate, then the files of the package the build does not use, left
# out of vendor/ (cargo's own records and lockfile, an agents' guide, the logo).
crates=(
  "lapin 4.12.3 3212643cc0031d982f81a62360998106268587237d81d6e8501a0a323e13b656 .cargo_vcs_info.json Cargo.lock AGENTS.md logo.jpg"
  "amq-protocol-types 10.6.3 8a268a50e97bd5d52292a8b96636f6436215def6f3d128fb8218318f5feb4c33 .cargo_vcs_info.json Cargo.lock"
)

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$cache" "$out"

for entry in "${crates[@]}"; do
  read -r name version sum unused <<<"$entry"
  crate="$cache/$name-$version.crate"
  if [[ ! -s $crate ]] || ! echo "$sum  $crate" | sha256sum -c --quiet - 2>/dev/null; then
    curl -fsSL --retry 3 -o "$crate.part" "https://static.crates.io/crates/$name/$name-$version.crate"
    mv "$crate.part" "$crate"
  fi
  echo "$sum  $crate" | sha256sum -c --quiet - || {
    echo "vendor.sh: $name-$version.crate does not match its sha256" >&2
    exit 1
  }
  tar -xzf "$crate" -C "$work"
  src="$work/$name-$version"
  for file in $unused; do
    rm -f "$src/$file"
  done
  for p in patches/"$name"/*.patch; do
    patch -d "$src" -p1 --forward --fuzz=0 --no-backup-if-mismatch --quiet <"$p" || {
      echo "vendor.sh: $p does not apply to $name $version" >&2
      exit 1
    }
  done
  cp "patches/$name/PATCHED.md" "$src/PATCHED.md"
  rm -rf "${out:?}/$name"
  mv "$src" "$out/$name"
done
