#!/usr/bin/env bash
# test/install/check_uninstall.sh - `make install` puts every file where docs/building.md
# says, the installed plugin loads, and `make uninstall` removes all of it.
#
# Installs the build tree with DESTDIR (a new temporary directory), so the configured
# directories (quickstart's --prefix=$HOME/.local --with-plugin-dir=$HOME/.openmpi/components,
# or any other) are used as they are and nothing outside DESTDIR is touched. Checks:
#   - the installed files are exactly mca_coll_gpu.{so,la} (and, built with CUDA,
#     libcgpu_cuda_kernels.{so,la}) in the plugin directory and libcgpu_prof_trace.{so,la},
#     libcgpu_monitor.{so,la} in $libdir/coll-gpu, no other;
#   - the plugin exports mca_coll_gpu_component, and ompi_info, given the installed plugin
#     directory, lists coll/gpu's parameters from it;
#   - after `make uninstall DESTDIR=...` no file is left; the only directories left are
#     those on the way to the plugin directory and to $libdir, which Automake's uninstall
#     leaves (shared with other packages); $libdir/coll-gpu, ours alone, is gone.
# Prints "ok ..." / "FAIL ..." lines, exit status 0 only when every check passed.
# Environment: CGPU_BUILD_DIR (default: the repository root, where configure ran).

set -u
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
B=${CGPU_BUILD_DIR:-$REPO}
unset MAKEFLAGS MAKELEVEL MFLAGS # when run from make check: a make of its own
tmp=$(mktemp -d "${TMPDIR:-/tmp}/cgpu-install.XXXXXX") || exit 2
trap 'rm -rf "$tmp"' EXIT
dest=$tmp/dest
bad=0
fail() {
    echo "FAIL $*"
    bad=1
}

# the configured directories, as make expands them
# shellcheck disable=SC2016 # $(...) is make's, expanded by make
read -r _ plugindir profdir plugins < <(printf 'print-dirs:\n\t@echo "dirs: $(ompiplugindir) $(profplugindir) $(ompiplugin_LTLIBRARIES)"\n' |
    make -s -C "$B" -f Makefile -f - print-dirs 2>/dev/null | grep '^dirs: ')
if [ -z "${plugindir:-}" ] || [ -z "${profdir:-}" ]; then
    echo "FAIL cannot read ompiplugindir and profplugindir from $B/Makefile"
    exit 1
fi
echo "plugin directory: $plugindir; libraries: $profdir"

if ! make -C "$B" install DESTDIR="$dest" >"$tmp/install.log" 2>&1; then
    echo "FAIL make install DESTDIR=$dest"
    tail -n 30 "$tmp/install.log"
    exit 1
fi
# a build with CUDA also installs the kernels' object next to the plugin (the Makefile's
# CGPU_HAVE_CUDA conditional)
kernels=()
if [[ " ${plugins:-} " == *" libcgpu_cuda_kernels.la "* ]]; then
    kernels=("$plugindir"/libcgpu_cuda_kernels.{la,so})
fi
want=$(printf '%s\n' "$plugindir"/mca_coll_gpu.{la,so} "${kernels[@]}" \
    "$profdir"/libcgpu_{monitor,prof_trace}.{la,so} | sort)
got=$(cd "$dest" && find . \( -type f -o -type l \) | sed 's|^\.||' | sort)
if [ "$got" = "$want" ]; then
    echo "ok make install installed the $(wc -l <<<"$want") files, and no other"
else
    fail "make install: the installed files differ from the expected ones (< expected, > installed):"
    diff <(echo "$want") <(echo "$got") | sed 's/^/    /'
fi
for f in $want; do
    case "$f" in *.so) [ -s "$dest$f" ] || fail "$f is empty or missing" ;; esac
done
if nm -D --defined-only "$dest$plugindir/mca_coll_gpu.so" 2>/dev/null | grep -q ' mca_coll_gpu_component$'; then
    echo "ok the installed plugin exports mca_coll_gpu_component"
else
    fail "the installed plugin does not export mca_coll_gpu_component"
fi
pkglibdir=$(ompi_info --path pkglibdir --parsable 2>/dev/null | cut -d: -f3)
if OMPI_MCA_mca_base_component_path="$dest$plugindir:$pkglibdir" ompi_info --param coll gpu --level 9 \
    --parsable 2>&1 | grep -q ':param:coll_gpu_backend:value:'; then
    echo "ok ompi_info loads the installed plugin"
else
    fail "ompi_info does not list coll_gpu_backend from the installed plugin"
fi

if ! make -C "$B" uninstall DESTDIR="$dest" >"$tmp/uninstall.log" 2>&1; then
    fail "make uninstall DESTDIR=$dest"
    tail -n 30 "$tmp/uninstall.log"
fi
left=$(cd "$dest" && find . \( -type f -o -type l \) | sed 's|^\.||')
if [ -z "$left" ]; then
    echo "ok make uninstall removed every installed file"
else
    fail "make uninstall left files:"
    echo "$left" | sed 's/^/    /'
fi
# the directories Automake leaves: the plugin directory, $libdir and the ones above them
allowed=$(for d in "$plugindir" "$(dirname "$profdir")"; do
    while [ "$d" != / ] && [ "$d" != . ]; do
        echo "$d"
        d=$(dirname "$d")
    done
done | sort -u)
extra=$(cd "$dest" && find . -mindepth 1 -type d | sed 's|^\.||' | sort | comm -23 - <(echo "$allowed"))
if [ -z "$extra" ]; then
    echo "ok no directory left but the plugin directory, \$libdir and those above them"
else
    fail "make uninstall left directories:"
    echo "$extra" | sed 's/^/    /'
fi
exit "$bad"
