# CGPU_CHECK_CUDA: optional CUDA toolkit (nvcc + headers) for the cuda backend.
#
# --with-cuda=DIR (default /usr/local/cuda). Without it the build is host-only; an
# explicit --with-cuda whose toolkit is missing is an error. The driver API is loaded
# at run time with dlopen, so the plugin still loads where no GPU driver exists.
AC_DEFUN([CGPU_CHECK_CUDA], [
    AC_ARG_WITH([cuda],
        [AS_HELP_STRING([--with-cuda=DIR], [CUDA toolkit (default: /usr/local/cuda if present)])],
        [], [with_cuda=check])
    AC_ARG_WITH([cuda-arch],
        [AS_HELP_STRING([--with-cuda-arch=FLAGS],
            [nvcc -gencode flags (default: sm_80 and sm_90 code plus compute_90 PTX)])],
        [], [with_cuda_arch="-gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90"])
    cgpu_cuda_found=no
    cgpu_cuda_summary="no (host backend only)"
    CUDA_CPPFLAGS=""
    CUDA_LIBS=""
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
               CUDA_LIBS="-L$cgpu_cuda_libdir -lcudart_static -lstdc++ -lrt -ldl"
               cgpu_cuda_ver=`$NVCC --version 2>/dev/null | sed -n 's/.*release \([[0-9.]]*\).*/\1/p'`
               cgpu_cuda_summary="yes (nvcc $cgpu_cuda_ver in $cgpu_cuda_dir; $with_cuda_arch)"
               AC_MSG_RESULT([yes, nvcc $cgpu_cuda_ver])],
              [AC_MSG_RESULT([no])
               AS_IF([test "x$with_cuda" != "xcheck"],
                     [AC_MSG_ERROR([--with-cuda was given but no nvcc/cuda.h under $cgpu_cuda_dir])])
               AC_MSG_NOTICE([CUDA toolkit not found: building the host backend only])])
    ])
    AS_IF([test "$cgpu_cuda_found" = "yes"],
          [AC_DEFINE([CGPU_HAVE_CUDA], [1], [Build the cuda backend])])
    AM_CONDITIONAL([CGPU_HAVE_CUDA], [test "$cgpu_cuda_found" = "yes"])
    NVCC_ARCH_FLAGS="$with_cuda_arch"
    AC_SUBST([NVCC])
    AC_SUBST([NVCC_ARCH_FLAGS])
    AC_SUBST([CUDA_CPPFLAGS])
    AC_SUBST([CUDA_LIBS])
])
