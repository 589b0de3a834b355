#!/usr/bin/env bash
# test/find_python.sh - prints the python3 that imports mpi4py and numpy: the one in PATH,
# else /usr/bin/python3, which Debian's python3-mpi4py and python3-numpy serve (a PATH may
# start with pyenv's or a virtualenv's python3, which has neither). Exit status 1, nothing
# printed, when neither does. test/run_all.sh and test/docs/check_docs.py both run it, so the
# choice is made in one place.
for py in "$(command -v python3 2>/dev/null)" /usr/bin/python3; do
    if [ -n "$py" ] && [ -x "$py" ] && "$py" -c 'import mpi4py, numpy' >/dev/null 2>&1; then
        echo "$py"
        exit 0
    fi
done
exit 1
