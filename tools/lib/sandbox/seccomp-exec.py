# seccomp-exec.py ERRNO|kill ALLOW DENY FEATURES FAMILIES -- PROGRAM ARGS: loads filters like systemd's
# for the unit, then execs PROGRAM. Each restriction is its own filter (the kernel applies them all).
import errno, os, stat, sys
import seccomp as s
action, allow_file, deny_file, features, families = sys.argv[1:6]
argv = sys.argv[sys.argv.index('--') + 1:]
features = set(filter(None, features.split(',')))
blocked = s.KILL_PROCESS if action in ('', 'kill') else s.ERRNO(getattr(errno, action))
def rule(f, act, name, *args):
    try: f.add_rule(act, name, *args)
    except (RuntimeError, ValueError, OSError): pass   # a name this architecture does not have
def names(path): return [l.strip() for l in open(path) if l.strip()]
filters = []
def restriction():
    f = s.SyscallFilter(defaction=s.ALLOW); filters.append(f); return f
allow, deny = names(allow_file), set(names(deny_file))
if allow:   # allow list: everything else fails; native ABI only (libseccomp's default)
    main = s.SyscallFilter(defaction=blocked)
    for n in [n for n in allow if n not in deny] + ['execve', 'exit', 'exit_group', 'rt_sigreturn']:
        rule(main, s.ALLOW, n)
else:
    main = s.SyscallFilter(defaction=s.ALLOW)
    for n in deny: rule(main, blocked, n)
if families and families != 'none':
    keep = {getattr(__import__('socket'), f) for f in families.replace('~', '').split()}
    f = restriction()
    for af in range(0, 64):
        if (af in keep) != families.startswith('~'): continue
        rule(f, s.ERRNO(errno.EAFNOSUPPORT), 'socket', s.Arg(0, s.EQ, af))
if 'mdwe' in features:
    f = restriction(); W, X, SHM_EXEC = 0x2, 0x4, 0o100000
    rule(f, s.ERRNO(errno.EPERM), 'mmap', s.Arg(2, s.MASKED_EQ, W | X, W | X))
    for n in ('mprotect', 'pkey_mprotect'): rule(f, s.ERRNO(errno.EPERM), n, s.Arg(2, s.MASKED_EQ, X, X))
    rule(f, s.ERRNO(errno.EPERM), 'shmat', s.Arg(2, s.MASKED_EQ, SHM_EXEC, SHM_EXEC))
if 'namespaces' in features:
    f = restriction()
    for flag in (0x80, 0x20000, 0x2000000, 0x4000000, 0x8000000, 0x10000000, 0x20000000, 0x40000000):
        for n in ('unshare', 'clone'): rule(f, s.ERRNO(errno.EPERM), n, s.Arg(0, s.MASKED_EQ, flag, flag))
    rule(f, s.ERRNO(errno.EPERM), 'setns')
    rule(f, s.ERRNO(errno.ENOSYS), 'clone3')   # as systemd: glibc falls back to the filtered clone()
if 'realtime' in features:
    f = restriction()
    for policy in (1, 2, 6): rule(f, s.ERRNO(errno.EPERM), 'sched_setscheduler', s.Arg(1, s.EQ, policy))
if 'personality' in features:
    f = restriction(); rule(f, s.ERRNO(errno.EPERM), 'personality', s.Arg(0, s.NE, 0), s.Arg(0, s.NE, 0xffffffff))
if 'suidsgid' in features:
    f = restriction()
    for n, i in (('chmod', 1), ('fchmod', 1), ('fchmodat', 2)):
        for bit in (stat.S_ISUID, stat.S_ISGID): rule(f, s.ERRNO(errno.EPERM), n, s.Arg(i, s.MASKED_EQ, bit, bit))
for f in filters + [main]:   # the allow list last: seccomp() itself is not on it
    f.load()
os.execv(argv[0], argv)
