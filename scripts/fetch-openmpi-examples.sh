#!/usr/bin/env bash
# Fetches Open MPI's OpenSHMEM example programs, unmodified, from Debian's `openmpi` source
# package into target/openmpi-examples, where tests/capi.rs builds them with gdacc and runs
# them with gdarun (programs written for Open MPI, run on gda without an edit).
#
#   scripts/fetch-openmpi-examples.sh        # no-op when they are there already
#
# Needs apt-get (as root, or sudo). Adds a deb-src entry for Debian's main archive when the
# system has none (/etc/apt/sources.list.d/gda-deb-src.sources).
set -euo pipefail
cd "$(dirname "$0")/.."
dest=target/openmpi-examples
want=(hello_oshmem_c.c hello_oshmem_cxx.cc ring_oshmem_c.c oshmem_circular_shift.c
  oshmem_max_reduction.c oshmem_shmalloc.c oshmem_strided_puts.c oshmem_symmetric_data.c)
have=1
for f in "${want[@]}"; do [ -f "$dest/$f" ] || have=0; done
[ $have = 1 ] && exit 0

sudo_cmd=()
[ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
export DEBIAN_FRONTEND=noninteractive
if ! apt-get source --print-uris -q openmpi >/dev/null 2>&1; then
  codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-bookworm}")
  printf 'Types: deb-src\nURIs: http://deb.debian.org/debian\nSuites: %s\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
    "$codename" | "${sudo_cmd[@]}" tee /etc/apt/sources.list.d/gda-deb-src.sources >/dev/null
  "${sudo_cmd[@]}" apt-get update -q
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
chmod 755 "$tmp"
(cd "$tmp" && apt-get source --download-only -q openmpi >/dev/null 2>&1)
orig=$(ls "$tmp"/openmpi_*.orig.tar.* | head -1)
mkdir -p "$dest"
members=()
for f in "${want[@]}"; do members+=("--wildcards" "*/examples/$f"); done
tar -xf "$orig" -C "$tmp" "${members[@]}"
for f in "${want[@]}"; do cp "$tmp"/openmpi-*/examples/"$f" "$dest/"; done
basename "$orig" >"$dest/SOURCE"
echo "fetched ${#want[@]} Open MPI examples from $(cat "$dest/SOURCE") into $dest"
