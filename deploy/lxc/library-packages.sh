#!/bin/sh
# Prints, for each shared library the executables BINARY... load, one line "LIBRARY PACKAGE":
# the Debian package that installed it, or "-" where no package did (CUDA's libraries under
# /usr/local/cuda, say). deploy.sh runs it on the host for --binaries, and inside the
# container after a build, to keep exactly what the binaries need at run time.
#
#   library-packages.sh BINARY...
#
# POSIX sh: it runs in a bare container too. One dpkg query for all the libraries; each is
# looked up under its path, its resolved path and both with and without /usr (Debian 12
# merged /usr, but dpkg records the path a package shipped).
set -eu
[ $# -gt 0 ] || {
  echo "usage: library-packages.sh BINARY..." >&2
  exit 2
}
work="$(mktemp -d)"
trap 'rm -rf "${work}"' EXIT
ldd "$@" | awk '/=> \// {print $3}' | sort -u >"${work}/libs"
while read -r lib; do
  real="$(readlink -f "${lib}")"
  for path in "${lib}" "${real}" "${lib#/usr}" "/usr${lib}" "${real#/usr}" "/usr${real}"; do
    echo "${lib} ${path}"
  done
done <"${work}/libs" >"${work}/candidates"
# "package[:arch][, package...]: path" for each path a package owns; errors for the others.
awk '{print $2}' "${work}/candidates" | sort -u | xargs dpkg -S 2>/dev/null >"${work}/owners" || true
awk '
  FNR == NR {
    i = index($0, ": /")
    if (i == 0) next  # "diversion by ..." and the like
    pkg = substr($0, 1, i - 1)
    sub(/[:,].*/, "", pkg)
    owner[substr($0, i + 2)] = pkg
    next
  }
  {
    if (!($1 in found) && ($2 in owner)) found[$1] = owner[$2]
    libs[$1] = 1
  }
  END { for (l in libs) print l, ((l in found) ? found[l] : "-") }
' "${work}/owners" "${work}/candidates" | sort
