#!/bin/sh
# sandbox.sh DIR UID ERRNO FEATURES FAMILIES -- PROGRAM ARGS (inside unshare --mount --net --ipc --uts;
# everything execs, so PROGRAM keeps the pid systemd-socket-activate put in LISTEN_PID)
set -eu
dir=$1 uid=$2 action=$3 features=$4 families=$5; shift 5; [ "$1" = -- ] && shift
m() { mount -n "$@"; }   # -n: /run/mount/utab becomes read-only below
m --make-rprivate /
m -t tmpfs -o mode=0755,nosuid,noexec tmpfs "$dir/dev"
for n in null zero full random urandom tty; do touch "$dir/dev/$n"; m --bind "/dev/$n" "$dir/dev/$n"; done
mkdir -m 1777 "$dir/dev/shm"; mkdir "$dir/dev/pts"
ln -s /proc/self/fd "$dir/dev/fd"
for i in 0:stdin 1:stdout 2:stderr; do ln -s "/proc/self/fd/${i%%:*}" "$dir/dev/${i#*:}"; done
for w in "$dir/lib/registryd" "$dir/lib/registryd-backups"; do m --bind "$w" "$w"; done
m -t tmpfs -o mode=1777,nosuid,nodev tmpfs /tmp
m -t tmpfs -o mode=1777,nosuid,nodev tmpfs /var/tmp
for h in /home /root /run/user; do if [ -d "$h" ]; then m -t tmpfs -o ro,mode=000 tmpfs "$h"; fi; done
findmnt -rn -o TARGET | sort -u | while read -r t; do
  case "$t" in /proc|/proc/*|/dev|/dev/*|"$dir"/dev|"$dir"/dev/*|"$dir"/lib/*) continue ;; esac
  m -o remount,bind,ro "$t" 2>/dev/null || echo "sandbox: could not make $t read-only" >&2
done
for w in "$dir/lib/registryd" "$dir/lib/registryd-backups"; do m -o remount,bind,rw "$w"; done
m --move "$dir/dev" /dev
m -t proc -o nosuid,nodev,noexec,hidepid=invisible,subset=pid proc /proc
umask 0077
exec setpriv --reuid="$uid" --regid="$uid" --clear-groups --no-new-privs \
  --inh-caps=-all --ambient-caps=-all --bounding-set=-all \
  /usr/bin/python3 "$dir/seccomp-exec.py" "$action" "$dir/allow" "$dir/deny" "$features" "$families" -- "$@"
