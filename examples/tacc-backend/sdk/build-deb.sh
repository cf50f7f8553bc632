#!/bin/sh
# Builds the tacc toolkit VERSION (e.g. 2.0.0, or 2.0 for 2.0.0) from this directory into OUTDIR/tacc-toolkit_VERSION_<arch>.deb with
# dpkg-deb: /opt/tacc/{include,lib}, and /etc/ld.so.conf.d/tacc.conf so the loader finds libtacc.so.MAJOR.
# Needs a C compiler and dpkg-deb (any Debian). Used by the example's image recipe (docker/tacc.Dockerfile).
set -eu
version=${1:?usage: build-deb.sh VERSION OUTDIR}
out=${2:?usage: build-deb.sh VERSION OUTDIR}
here=$(cd "$(dirname "$0")" && pwd)
case "$version" in *.*.*) ;; *.*) version="$version.0" ;; esac
major=${version%%.*}
rest=${version#*.}
minor=${rest%%.*}
case "$major$minor" in *[!0-9]*|'') echo "error: version '$version' is not MAJOR.MINOR.PATCH" >&2; exit 2;; esac
arch=$(dpkg --print-architecture)
root=$(mktemp -d)
chmod 0755 "$root"
trap 'rm -rf "$root"' EXIT

mkdir -p "$root/opt/tacc/include/tacc" "$root/opt/tacc/lib" "$root/etc/ld.so.conf.d" "$root/DEBIAN"
cp "$here/include/tacc/tacc.h" "$root/opt/tacc/include/tacc/"
printf '#define TACC_VERSION_MAJOR %s\n#define TACC_VERSION_MINOR %s\n' "$major" "$minor" \
  > "$root/opt/tacc/include/tacc/tacc_version.h"
${CC:-cc} -O2 -fPIC -shared -pthread -I"$root/opt/tacc/include" -Wl,-soname,"libtacc.so.$major" \
  -o "$root/opt/tacc/lib/libtacc.so.$version" "$here/src/tacc.c"
ln -s "libtacc.so.$version" "$root/opt/tacc/lib/libtacc.so.$major"
ln -s "libtacc.so.$major" "$root/opt/tacc/lib/libtacc.so"
echo /opt/tacc/lib > "$root/etc/ld.so.conf.d/tacc.conf"
echo "$version" > "$root/opt/tacc/VERSION"
cat > "$root/DEBIAN/control" <<CONTROL
Package: tacc-toolkit
Version: $version
Architecture: $arch
Maintainer: torch-buildmatrix examples <noreply@example.invalid>
Section: libdevel
Priority: optional
Description: runtime, headers and library of the toy accelerator tacc (API $major.$minor)
 A system toolkit for the torch-buildmatrix example backend torch-tacc.
CONTROL
printf '#!/bin/sh\nset -e\nldconfig\n' > "$root/DEBIAN/postinst"
printf '#!/bin/sh\nset -e\nldconfig\n' > "$root/DEBIAN/postrm"
chmod 0755 "$root/DEBIAN/postinst" "$root/DEBIAN/postrm"
mkdir -p "$out"
dpkg-deb --root-owner-group --build "$root" "$out/tacc-toolkit_${version}_${arch}.deb"
