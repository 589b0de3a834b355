# Shell helpers the bench scripts share (sourced): figures of a column of numbers on stdin.
# shellcheck shell=bash
median() { sort -g | awk '{v[NR] = $1} END {if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
least() { sort -g | head -n 1; }
