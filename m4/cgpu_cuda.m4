# CGPU_CHECK_CUDA: optional CUDA toolkit (nvcc + headers) for the cuda backend, and the GPU
# architectures the kernels are built for.
#
# --with-cuda=DIR (default /usr/local/cuda). Without it the build is host-only; an
# explicit --with-cuda whose toolkit is missing is an error. The driver API is loaded
# at run time with dlopen, so the plugin still loads where no GPU driver exists.
#
# --with-cuda-arch: every architecture costs a ptxas run over every kernel instance (most of
# the build's time and of the plugin's size), so the default builds for the machine's GPUs
# only:
#   auto (default)  machine code (SASS) for each GPU nvidia-smi reports, plus the PTX of the
#                   newest for later GPUs; where no GPU is found, compute_80 PTX alone
#                   (the lowest architecture the project targets; the driver compiles it for
#                   the GPU at first use and caches the result, which takes minutes once)
#   all             SASS for sm_80, sm_90 (and sm_100 where nvcc has it), compute_90 PTX
#   FLAGS           nvcc -gencode flags, used as given
AC_DEFUN([CGPU_CHECK_CUDA], [
    AC_ARG_WITH([cuda],
        [AS_HELP_STRING([--with-cuda=DIR], [CUDA toolkit (default: /usr/local/cuda if present)])],
        [], [with_cuda=check])
    AC_ARG_WITH([cuda-arch],
        [AS_HELP_STRING([--with-cuda-arch=auto|all|FLAGS],
            [GPU code of the kernels: auto (default) = SASS for the GPUs nvidia-smi reports plus
             their PTX, or compute_80 PTX only where none is found; all = sm_80, sm_90 (and
             sm_100 where nvcc has it) SASS plus compute_90 PTX; else nvcc -gencode flags])],
        [], [with_cuda_arch=auto])
    cgpu_cuda_found=no
    cgpu_cuda_summary="no (host backend only)"
    CUDA_CPPFLAGS=""
    CUDA_LIBS=""
    NVCC_ARCH_FLAGS=""
    AS_IF([test "x$with_cuda" != "xno"], [
        cgpu_cuda_dir="$with_cuda"
        AS_IF([test "x$with_cuda" = "xcheck" || test "x$with_cuda" = "xyes"],
              [cgpu_cuda_dir=/usr/local/cuda])
        AC_MSG_CHECKING([for the CUDA toolkit in $cgpu_cuda_dir])
        AS_IF([test -x "$cgpu_cuda_dir/bin/nvcc" && test -f "$cgpu_cuda_dir/include/cuda.h"],
              [cgpu_cuda_found=yes
               NVCC="$cgpu_cuda_dir/bin/nvcc"
               CUDA_CPPFLAGS="-I$cgpu_cuda_dir/include"
               cgpu_cuda_libdir="$cgpu_cuda_dir/lib64"
               AS_IF([test ! -d "$cgpu_cuda_libdir"], [cgpu_cuda_libdir="$cgpu_cuda_dir/lib"])
               CUDA_LIBS="-L$cgpu_cuda_libdir -lcudart_static -lrt -ldl -lpthread"
               cgpu_cuda_ver=`$NVCC --version 2>/dev/null | sed -n 's/.*release \([[0-9.]]*\).*/\1/p'`
               AC_MSG_RESULT([yes, nvcc $cgpu_cuda_ver])],
              [AC_MSG_RESULT([no])
               AS_IF([test "x$with_cuda" != "xcheck"],
                     [AC_MSG_ERROR([--with-cuda was given but no nvcc/cuda.h under $cgpu_cuda_dir])])
               AC_MSG_NOTICE([CUDA toolkit not found: building the host backend only])])
    ])
    AS_IF([test "$cgpu_cuda_found" = "yes"], [
        CGPU_CUDA_ARCH
        cgpu_cuda_summary="yes (nvcc $cgpu_cuda_ver in $cgpu_cuda_dir); kernels: $cgpu_cuda_arch_desc"
        AC_DEFINE([CGPU_HAVE_CUDA], [1], [Build the cuda backend])])
    AM_CONDITIONAL([CGPU_HAVE_CUDA], [test "$cgpu_cuda_found" = "yes"])
    AC_SUBST([NVCC])
    AC_SUBST([NVCC_ARCH_FLAGS])
    AC_SUBST([CUDA_CPPFLAGS])
    AC_SUBST([CUDA_LIBS])
])

# CGPU_CUDA_ARCH: NVCC_ARCH_FLAGS and a line for the summary (cgpu_cuda_arch_desc) from
# $with_cuda_arch and, for auto, the compute capabilities nvidia-smi reports (an architecture
# nvcc does not know is left out: nvcc --list-gpu-arch).
AC_DEFUN([CGPU_CUDA_ARCH], [
    AC_MSG_CHECKING([the GPU architectures of the kernels])
    cgpu_nvcc_archs=" `$NVCC --list-gpu-arch 2>/dev/null | tr '\n' ' '` "
    case "x$with_cuda_arch" in
    xauto|xyes|xno|x)
        # "9.0" per GPU; anything else (no driver, an nvidia-smi too old for the field) is no GPU
        cgpu_gpu_ccs=`nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null |
            tr -d ' \r' | grep -E '^[[0-9]]+\.[[0-9]]+$' | tr -d . | sort -n -u | tr '\n' ' '`
        cgpu_cc_max=""
        cgpu_sms=""
        for cgpu_cc in $cgpu_gpu_ccs; do
            AS_CASE([$cgpu_nvcc_archs],
                [*" compute_$cgpu_cc "*],
                [NVCC_ARCH_FLAGS="$NVCC_ARCH_FLAGS -gencode arch=compute_$cgpu_cc,code=sm_$cgpu_cc"
                 cgpu_sms="$cgpu_sms sm_$cgpu_cc"
                 cgpu_cc_max=$cgpu_cc],
                [AC_MSG_WARN([nvcc has no sm_$cgpu_cc (a GPU of this machine): not built for it])])
        done
        AS_IF([test -n "$cgpu_cc_max"],
              [NVCC_ARCH_FLAGS="$NVCC_ARCH_FLAGS -gencode arch=compute_$cgpu_cc_max,code=compute_$cgpu_cc_max"
               cgpu_cuda_arch_desc="SASS for this machine's GPUs:$cgpu_sms + compute_$cgpu_cc_max PTX"],
              [NVCC_ARCH_FLAGS="-gencode arch=compute_80,code=compute_80"
               cgpu_cuda_arch_desc="compute_80 PTX only (no GPU found; compiled by the driver at first use)"])
        NVCC_ARCH_FLAGS=`echo $NVCC_ARCH_FLAGS`
        ;;
    xall)
        cgpu_ptx=""
        cgpu_sms=""
        for cgpu_cc in 80 90 100; do
            AS_CASE([$cgpu_nvcc_archs],
                [*" compute_$cgpu_cc "*],
                [NVCC_ARCH_FLAGS="$NVCC_ARCH_FLAGS -gencode arch=compute_$cgpu_cc,code=sm_$cgpu_cc"
                 cgpu_sms="$cgpu_sms sm_$cgpu_cc"
                 AS_IF([test $cgpu_cc -le 90], [cgpu_ptx=$cgpu_cc])])
        done
        AS_IF([test -z "$cgpu_ptx"],
              [AC_MSG_ERROR([--with-cuda-arch=all: nvcc $cgpu_cuda_ver knows none of sm_80, sm_90])])
        NVCC_ARCH_FLAGS="$NVCC_ARCH_FLAGS -gencode arch=compute_$cgpu_ptx,code=compute_$cgpu_ptx"
        NVCC_ARCH_FLAGS=`echo $NVCC_ARCH_FLAGS`
        cgpu_cuda_arch_desc="all: SASS for$cgpu_sms + compute_$cgpu_ptx PTX"
        ;;
    *)
        NVCC_ARCH_FLAGS="$with_cuda_arch"
        cgpu_cuda_arch_desc="as given: $NVCC_ARCH_FLAGS"
        ;;
    esac
    AC_MSG_RESULT([$NVCC_ARCH_FLAGS])
])
