#!/usr/bin/env bash
# Fills .gpu-deps/ (git-ignored) with what a machine without internet or development packages
# needs to build tandem's GPU check: copies of the headers and sources this machine has from
# Debian, and MNIST gzipped. Run it here, then carry .gpu-deps to the GPU machine and configure
# with -DTANDEM_VENDORED_DEPS=$PWD/.gpu-deps (scripts/gpu-check.sh does that).
#
#   googletest/     /usr/src/googletest (Debian googletest), built there by add_subdirectory
#   fmt/include     /usr/include/fmt (libfmt-dev), used header-only (FMT_HEADER_ONLY)
#   nlohmann_json/include, cli11/include   header-only libraries
#   zlib/include    zlib.h and zconf.h, used only when the machine has no zlib headers
#   nifti/          nifticlib (libnifti2-dev): include/nifti/ headers, lib/ static libnifti2.a
#                   and libznz.a (position-independent, linked into tandem_data)
#   minizip/        minizip (libminizip-dev): include/minizip/ headers, lib/libminizip.a
#                   (position-independent, linked into tandem_checkpoint)
#   mnist/          data/mnist/*-ubyte gzipped (the loaders read .gz), when data/mnist exists
#
# Google Benchmark is not copied: configure with -DTANDEM_BUILD_BENCH=OFF. Idempotent: the
# folder is rebuilt from scratch on every run.
set -euo pipefail
cd "$(dirname "$0")/.."
out=.gpu-deps

need() {
  if [ ! -e "$1" ]; then
    echo "gpu-deps: $1 is missing; install $2 (scripts/setup installs it)" >&2
    exit 1
  fi
}
need /usr/src/googletest/CMakeLists.txt googletest
need /usr/include/fmt/format.h libfmt-dev
need /usr/include/nlohmann/json.hpp nlohmann-json3-dev
need /usr/include/CLI/CLI.hpp libcli11-dev
need /usr/include/zlib.h zlib1g-dev
need /usr/include/nifti/nifti2_io.h libnifti2-dev
need /usr/include/minizip/unzip.h libminizip-dev

rm -rf "$out"
mkdir -p "$out"/fmt/include "$out"/nlohmann_json/include "$out"/cli11/include "$out"/zlib/include \
  "$out"/nifti/include/nifti "$out"/nifti/lib "$out"/minizip/include/minizip "$out"/minizip/lib

# googletest without googlemock (not used) and without the docs.
mkdir -p "$out"/googletest
cp /usr/src/googletest/CMakeLists.txt "$out"/googletest/
cp -r /usr/src/googletest/googletest "$out"/googletest/
rm -rf "$out"/googletest/googletest/docs "$out"/googletest/googletest/samples \
  "$out"/googletest/googletest/test
cp -r /usr/include/fmt "$out"/fmt/include/
cp -r /usr/include/nlohmann "$out"/nlohmann_json/include/
cp -r /usr/include/CLI "$out"/cli11/include/
cp /usr/include/zlib.h "$out"/zlib/include/
# Debian keeps zconf.h in /usr/include; other layouts put it under the multiarch folder.
zconf=/usr/include/zconf.h
[ -f "$zconf" ] || zconf=/usr/include/$(gcc -dumpmachine)/zconf.h
cp "$zconf" "$out"/zlib/include/
cp /usr/include/nifti/{nifti1.h,nifti2.h,nifti2_io.h,znzlib.h} "$out"/nifti/include/nifti/
libdir=/usr/lib/$(gcc -dumpmachine)
cp "$libdir"/libnifti2.a "$libdir"/libznz.a "$out"/nifti/lib/
cp /usr/include/minizip/{unzip.h,ioapi.h} "$out"/minizip/include/minizip/
cp "$libdir"/libminizip.a "$out"/minizip/lib/

if [ -d data/mnist ]; then
  mkdir -p "$out"/mnist
  for f in data/mnist/*-ubyte; do
    gzip -9 -c "$f" >"$out/mnist/$(basename "$f").gz"
  done
fi

version() { dpkg-query -W -f='${Version}' "$1" 2>/dev/null || echo unknown; }
{
  echo "Filled by scripts/gpu-deps.sh on $(date -u +%Y-%m-%d) from Debian packages:"
  echo "googletest $(version googletest), libfmt-dev $(version libfmt-dev),"
  echo "nlohmann-json3-dev $(version nlohmann-json3-dev), libcli11-dev $(version libcli11-dev),"
  echo "zlib1g-dev $(version zlib1g-dev), libnifti2-dev $(version libnifti2-dev),"
  echo "libminizip-dev $(version libminizip-dev)."
  echo "Configure with -DTANDEM_VENDORED_DEPS=<this folder>."
} >"$out"/README

size=$(du -sm "$out" | cut -f1)
echo "gpu-deps: filled $out (${size} MiB): $(ls "$out" | tr '\n' ' ')"
if [ "$size" -ge 20 ]; then
  echo "gpu-deps: $out is ${size} MiB, more than the 20 MiB it should take" >&2
  exit 1
fi
