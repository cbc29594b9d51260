# Sourced by the tools that install Debian packages. Callers decide what is missing (with
# command -v, pkg-config or a Python import, which say more than dpkg's status) and call
#   apt_install "WHY" PACKAGE...
# which says what it installs and why on stderr, runs `apt-get update` once per process, and
# installs without recommends, as root or through sudo. Output goes to stderr, so a tool whose
# stdout is data (tools/bench's JSON) stays clean.
apt_updated=0

apt_install() {
  local why="$1"
  shift
  [ $# -gt 0 ] || return 0
  echo "installing: $* ($why)" >&2
  local sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  if [ "$apt_updated" -eq 0 ]; then
    "${sudo_cmd[@]}" apt-get update -qq >&2
    apt_updated=1
  fi
  # A concurrent apt run can make dpkg miss a cached .deb: one retry.
  "${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >&2 \
    || "${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >&2
}
