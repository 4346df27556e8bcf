# Sourced by setup parts: install the Debian packages that are missing (root; apt waits for a lock
# another setup part holds). Usage: ensure_debian_packages "<what for>" pkg...
ensure_debian_packages() {
  local label=$1; shift
  local missing="" p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
  done
  [ -n "$missing" ] || return 0
  export DEBIAN_FRONTEND=noninteractive
  apt-get -o DPkg::Lock::Timeout=600 update -qq
  echo "$label: apt-get install$missing"
  # shellcheck disable=SC2086
  apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends $missing >/dev/null
}
