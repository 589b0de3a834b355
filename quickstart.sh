#!/usr/bin/env bash
# Quick start on a fresh Debian 12 / Ubuntu 24.04 machine: install the dependencies,
# build, install the plugin where Open MPI finds it ($HOME/.openmpi/components, part of
# Open MPI's default mca_base_component_path) and run the 4-rank demo job.
set -euo pipefail
cd "$(dirname "$0")"
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
if [ "${CGPU_SKIP_APT:-0}" != 1 ]; then
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
        build-essential autoconf automake libtool pkg-config \
        openmpi-bin libopenmpi-dev libhwloc-dev libfabric-dev libcunit1-dev \
        python3 python3-mpi4py python3-numpy valgrind >/dev/null
fi
./autogen.sh >/dev/null 2>&1
./configure --enable-werror --prefix="$HOME/.local" \
    --with-plugin-dir="$HOME/.openmpi/components" ${CGPU_CONFIGURE_FLAGS:-}
make -j"$(nproc)"
make install
echo
echo "== installed: $(ls "$HOME"/.openmpi/components/mca_coll_gpu.so)"
echo "== demo job: 4 ranks, coll/gpu serving host buffers (coll_gpu_backend=host)"
make demo
