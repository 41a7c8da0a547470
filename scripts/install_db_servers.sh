#!/usr/bin/env bash
# Install the PostgreSQL and MariaDB servers that the SQL tests start (Debian packages).
# The tests run their own throwaway servers (tests/support/db_servers.py): unprivileged, in a
# temporary data directory, on a free port of 127.0.0.1. The packages' own clusters and
# services are never started. Fast when everything is there already: no apt-get at all.
set -euo pipefail

have_postgresql() {
  compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null &&
    compgen -G '/usr/lib/postgresql/*/bin/postgres' >/dev/null
}

have_mariadb() {
  { command -v mariadbd >/dev/null 2>&1 || [ -x /usr/sbin/mariadbd ]; } &&
    { command -v mariadb-install-db >/dev/null 2>&1 || [ -x /usr/bin/mariadb-install-db ]; }
}

packages=()
have_postgresql || packages+=(postgresql)
have_mariadb || packages+=(mariadb-server)
if [ ${#packages[@]} -eq 0 ]; then
  exit 0
fi

if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  # Not fatal here (the demo does not need them); the SQL server tests fail with this hint.
  echo "setup: warning: the SQL server tests need ${packages[*]} (Debian packages);" \
    "install them as root: apt-get install -y --no-install-recommends ${packages[*]}" >&2
  exit 0
fi

echo "setup: installing ${packages[*]} (Debian packages, for the SQL tests)"
# Keep the packages' maintainer scripts from starting their services (a cluster on port 5432,
# a root mariadbd): on a machine without a policy-rc.d, install one for the duration.
policy=/usr/sbin/policy-rc.d
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' >"$policy"
  chmod 755 "$policy"
  trap 'rm -f "$policy"' EXIT
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${packages[@]}" >/dev/null
have_postgresql && have_mariadb || {
  echo "setup: ${packages[*]} installed, but initdb/postgres or mariadbd/mariadb-install-db" \
    "are still missing" >&2
  exit 1
}
