#!/usr/bin/env bash
# Run the demo job: 4 ranks on this machine, coll/gpu with the host backend (every call on
# its engine, which the host backend leaves to tuned by default: coll_gpu_host_rule), using the
# plugin Open MPI finds on its default component path (installed by `make install`).
set -euo pipefail
builddir=${1:-.}
extra=()
if [ "$(id -u)" = 0 ]; then extra+=(--allow-run-as-root); fi
exec mpirun "${extra[@]}" --oversubscribe -np 4 \
    --mca coll gpu,tuned,libnbc,basic,self --mca coll_gpu_backend host --mca coll_gpu_host_rule engine \
    "$builddir/examples/demo"
