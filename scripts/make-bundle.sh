#!/usr/bin/env bash
# Assembles dist/qgate: copies binaries, kernel builds (fault builds to plugins/faults/), GPU
# tests and the dashboard (share/qgate/dashboard), then every shared library
# they load that a bare GPU host may lack (all but glibc and the NVIDIA driver's own), and checks
# that each file resolves its libraries from the bundle alone.
# Usage: make-bundle.sh DEST SOURCE_DIR   (lists come from QGATE_BUNDLE_* variables, ';'-separated)
set -euo pipefail
dest=$1
src=$2
# The bundle's budget: it travels to GPU hosts whole (a tarball of it well under 64 MiB). libpq is not
# in it: qgated loads libpq.so.5 from the host only when its store is PostgreSQL (docs/fleet.md), so
# nothing here may need it, nor the Kerberos, LDAP and GnuTLS libraries it would bring (about 9 MB).
limit_mb=60

rm -rf "$dest"
mkdir -p "$dest"/{bin,lib,plugins,plugins/faults,tests}
IFS=';' read -r -a binaries <<<"${QGATE_BUNDLE_BINARIES:-}"
IFS=';' read -r -a plugins <<<"${QGATE_BUNDLE_PLUGINS:-}"
IFS=';' read -r -a faults <<<"${QGATE_BUNDLE_FAULTS:-}"
IFS=';' read -r -a tests <<<"${QGATE_BUNDLE_TESTS:-}"
for f in "${binaries[@]}"; do [ -n "$f" ] && cp "$f" "$dest/bin/"; done
for f in "${plugins[@]}"; do [ -n "$f" ] && cp "$f" "$dest/plugins/"; done
for f in "${faults[@]}"; do [ -n "$f" ] && cp "$f" "$dest/plugins/faults/"; done
for f in "${tests[@]}"; do [ -n "$f" ] && cp "$f" "$dest/tests/"; done
cp "$src/scripts/qgate-gpu-check" "$src/scripts/qgate-two-gpu-check" "$src/scripts/qgate-cotenant-experiment" \
  "$src/scripts/qgate-kernel-campaign" "$src/scripts/qgate-bench-compare" "$src/scripts/qgate-ncu-stalls" "$dest/bin/"
# The dashboard (page, script, vendored chart libraries): qgated --http serves it from ../share.
if [ -n "${QGATE_BUNDLE_DASHBOARD:-}" ]; then
  [ -f "$QGATE_BUNDLE_DASHBOARD/index.html" ] || { echo "bundle: no dashboard in $QGATE_BUNDLE_DASHBOARD" >&2; exit 1; }
  mkdir -p "$dest/share/qgate"
  cp -r "$QGATE_BUNDLE_DASHBOARD" "$dest/share/qgate/dashboard"
fi
chmod +x "$dest/bin/qgate-gpu-check" "$dest/bin/qgate-two-gpu-check" "$dest/bin/qgate-cotenant-experiment" \
  "$dest/bin/qgate-kernel-campaign" "$dest/bin/qgate-bench-compare" "$dest/bin/qgate-ncu-stalls"
# The bundle's own ELF files travel without debug information (the build tree keeps it).
if command -v strip >/dev/null; then
  for f in "$dest"/bin/* "$dest"/plugins/* "$dest"/plugins/faults/* "$dest"/tests/*; do
    [ -f "$f" ] && file -L "$f" | grep -q ELF && strip --strip-unneeded "$f"
  done
fi

# glibc and the driver come from the host; everything else travels.
is_system() {
  case "$(basename "$1")" in
    libc.so.*|libm.so.*|libdl.so.*|librt.so.*|libpthread.so.*|ld-linux*|libresolv.so.*|libutil.so.*) return 0 ;;
    libcuda.so*|libnvidia-*.so*|linux-vdso*) return 0 ;;
  esac
  return 1
}

copy_deps() {
  ldd "$1" | awk '/=> \//{print $3}' | while read -r lib; do
    is_system "$lib" && continue
    [ -e "$dest/lib/$(basename "$lib")" ] && continue
    cp -L "$lib" "$dest/lib/"
  done
}
for f in "$dest"/bin/* "$dest"/plugins/* "$dest"/plugins/faults/* "$dest"/tests/*; do
  [ -f "$f" ] && file -L "$f" | grep -q ELF && copy_deps "$f"
done
# Libraries found in lib/ may need others that the top-level files do not name directly.
for pass in 1 2; do for f in "$dest"/lib/*; do copy_deps "$f"; done; done

# Every copied library must find its neighbours first: DT_RPATH $ORIGIN (inherited by its deps).
if command -v patchelf >/dev/null; then
  for f in "$dest"/lib/*; do patchelf --force-rpath --set-rpath '$ORIGIN' "$f" 2>/dev/null || true; done
  for f in "$dest"/plugins/* "$dest"/tests/* "$dest"/bin/*; do
    [ -f "$f" ] && file -L "$f" | grep -q ELF && patchelf --force-rpath --set-rpath '$ORIGIN/../lib' "$f"
  done
  for f in "$dest"/plugins/faults/*; do
    [ -f "$f" ] && file -L "$f" | grep -q ELF && patchelf --force-rpath --set-rpath '$ORIGIN/../../lib' "$f"
  done
fi

# Check: nothing unresolved, nothing resolved outside the bundle but glibc and the driver.
status=0
for f in "$dest"/bin/* "$dest"/plugins/* "$dest"/plugins/faults/* "$dest"/tests/* "$dest"/lib/*; do
  [ -f "$f" ] || continue
  file -L "$f" | grep -q ELF || continue
  while read -r name arrow path _; do
    if [ "$path" = "not" ]; then echo "bundle: $f: $name not found" >&2; status=1; continue; fi
    case "$name" in libpq.so*) echo "bundle: $f needs $name, which qgated loads at run time only" >&2; status=1 ;; esac
    case "$path" in
      "$dest"/*) ;;
      /*) is_system "$path" || { echo "bundle: $f loads $path from outside the bundle" >&2; status=1; } ;;
    esac
  done < <(ldd "$f" | awk '/=>/{print $1, $2, $3}')
done
size_mb=$(du -sm "$dest" | cut -f1)
echo "bundle: $dest: $(ls "$dest/lib" | wc -l) libraries, ${size_mb} MB"
if [ "$size_mb" -ge "$limit_mb" ]; then echo "bundle: over the ${limit_mb} MB limit" >&2; status=1; fi
exit $status
