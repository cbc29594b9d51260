# shellcheck shell=bash
# Sourced by clients/go/generate and clients/go/run-tests (not executable on its own).
#
#   ensure_tools TOOL...   installs, via apt, the Debian package of each tool that is missing
#                          (go, gofmt, protoc, protoc-gen-go, and "protobuf-runtime": the Go protobuf
#                          runtime's source under /usr/share/gocode/src that go.mod's replace uses)
#   offline_go_env         exports the go command's settings that keep it off the network
#
# apt-get update runs only when an install fails (a fresh machine's package lists may be missing or
# stale), then the install is retried once. As root or through sudo; output goes to stderr.

# Where Debian's golang-google-protobuf-dev puts google.golang.org/protobuf (go.mod's replace).
protobuf_runtime_dir=/usr/share/gocode/src/google.golang.org/protobuf

package_for_tool() {
  case "$1" in
    go | gofmt) echo golang-go ;;
    protoc) echo protobuf-compiler ;;
    protoc-gen-go) echo protoc-gen-go ;;
    protobuf-runtime) echo golang-google-protobuf-dev ;;
    *)
      echo "lib.sh: no package known for '$1'" >&2
      return 1
      ;;
  esac
}

tool_present() {
  case "$1" in
    protobuf-runtime) [ -f "$protobuf_runtime_dir/go.mod" ] ;;
    *) command -v "$1" >/dev/null 2>&1 ;;
  esac
}

ensure_tools() {
  local tool package missing=()
  for tool in "$@"; do
    if ! tool_present "$tool"; then
      package=$(package_for_tool "$tool")
      case " ${missing[*]} " in *" $package "*) ;; *) missing+=("$package") ;; esac
    fi
  done
  [ ${#missing[@]} -gt 0 ] || return 0
  echo "installing: ${missing[*]} (the Go client needs them; Debian packages, no Go module proxy)" >&2
  local sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  local install=("${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}")
  if ! "${install[@]}" >&2; then
    echo "apt-get install failed; running apt-get update once and retrying" >&2
    "${sudo_cmd[@]}" apt-get update -qq >&2
    "${install[@]}" >&2
  fi
  for tool in "$@"; do
    if ! tool_present "$tool"; then
      echo "lib.sh: '$tool' is still missing after installing $(package_for_tool "$tool")" >&2
      return 1
    fi
  done
}

# GOPROXY=off: a module that go.mod does not resolve to a local directory fails at once instead of
# being looked up; GOFLAGS=-mod=readonly: go.mod is never rewritten; GOSUMDB=off: no checksum database
# (the one dependency is a local directory, which needs no go.sum entry); GOTOOLCHAIN=local: a go
# command newer than 1.21 does not try to download another toolchain; CGO_ENABLED=0: no C compiler is
# needed (the client is pure Go). The caches live in the repository's ignored .build directory.
offline_go_env() {
  local repo_root
  repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
  export GOPROXY=off
  export GOFLAGS=-mod=readonly
  export GOSUMDB=off
  export GOTOOLCHAIN=local
  export GOCACHE="$repo_root/.build/go-cache"
  export GOMODCACHE="$repo_root/.build/go-mod-cache"
  export CGO_ENABLED="${CGO_ENABLED:-0}"
}
