#!/bin/sh
# t-install.sh: installs the build into a temporary prefix, then builds and runs two consumers, one with
# `pkg-config --cflags --libs exactref` and one with find_package(exactref); checks the SONAME.
# Usage: t-install.sh SOURCE_DIR BUILD_DIR
set -eu
src=$1
build=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix
cmake --install "$build" --prefix "$prefix" >/dev/null
pc=$(find "$prefix" -name exactref.pc)
[ -n "$pc" ] || { echo "exactref.pc was not installed"; exit 1; }
libdir=$(dirname "$(dirname "$pc")")
test -f "$prefix/include/exactref/exactref.h" || { echo "headers not installed"; exit 1; }
test -f "$prefix/include/exactref/version.h" || { echo "version.h not installed"; exit 1; }
soname=$(readelf -d "$libdir/libexactref.so" | sed -n 's/.*SONAME.*\[\(.*\)\]/\1/p')
[ "$soname" = "libexactref.so.0" ] || { echo "unexpected SONAME '$soname'"; exit 1; }

export PKG_CONFIG_PATH="$(dirname "$pc")${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
cc -std=c11 -Wall -Werror "$src/tests/install/consumer.c" $(pkg-config --cflags --libs exactref) \
   -Wl,-rpath,"$libdir" -o "$work/consumer-pkgconfig"
"$work/consumer-pkgconfig"

cmake -S "$src/tests/install/consumer" -B "$work/cmake-consumer" -DCMAKE_PREFIX_PATH="$prefix" \
      -DCMAKE_BUILD_RPATH="$libdir" >/dev/null
cmake --build "$work/cmake-consumer" >/dev/null
"$work/cmake-consumer/consumer"
# the build tree's uninstalled .pc: compile and run the consumer against the build tree, nothing installed
PKG_CONFIG_PATH="$build" cc -std=c11 -Wall -Werror "$src/tests/install/consumer.c" \
   $(PKG_CONFIG_PATH="$build" pkg-config --cflags --libs exactref-uninstalled) -o "$work/consumer-uninstalled"
"$work/consumer-uninstalled"
echo "install: 3 passed, 0 failed"
