# AX_PTHREAD_CGPU: make sure POSIX threads link (the engine uses pthread mutexes).
AC_DEFUN([AX_PTHREAD_CGPU], [
    AC_CHECK_HEADER([pthread.h], [], [AC_MSG_ERROR([pthread.h not found])])
    AC_CHECK_LIB([pthread], [pthread_create], [],
                 [AC_MSG_ERROR([libpthread not found])])
])
