import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  AUDIT_ARCH,
  bwrapHardeningArgs,
  CLONE_NEW_FLAGS,
  decodeProgram,
  DENIED_SYSCALLS,
  SECCOMP_RET,
  seccompProgram,
  SYSCALL_NUMBERS,
  syscallNumber,
  type SeccompArch,
  type SockFilter,
} from '../../src/server/sandbox/seccomp.js';
import { apptainerArgs, apptainerSeccompProfile, installApptainerSeccomp } from '../../src/server/sandbox/apptainer.js';
import { installToolServer, SANDBOX_NODE } from '../../src/server/sandbox/prepare.js';
import { observed, testRoot } from './helpers.js';

const FIXTURES = path.join(path.dirname(fileURLToPath(import.meta.url)), 'fixtures');
const asRoot = process.getuid?.() === 0;
const idOf = (flag: string): number => Number(spawnSync('id', [flag, 'raas-sandbox'], { encoding: 'utf8' }).stdout.trim());
/** As root, bwrap runs as the sandbox user (as the runtime does); unprivileged, as ourselves. */
const ids = asRoot ? { uid: idOf('-u'), gid: idOf('-g') } : {};
const x64 = process.arch === 'x64';
const PY = '/usr/bin/python3';
const EPERM = 1;
const ENOSYS = 38;
const EAFNOSUPPORT = 97;
const errnoRet = (e: number): number => (SECCOMP_RET.ERRNO | e) >>> 0;
/** What landlock_create_ruleset(NULL, 0, VERSION) answers on this host without a filter: its ABI version ("ok"), or an errno (EOPNOTSUPP with the LSM off). */
const LANDLOCK_VERDICT: number | 'ok' = (() => {
  const r = spawnSync(
    PY,
    [
      '-c',
      'import ctypes; l = ctypes.CDLL(None, use_errno=True); r = l.syscall(444, None, 0, 1); print("ok" if r >= 0 else ctypes.get_errno())',
    ],
    { encoding: 'utf8' },
  );
  const v = r.stdout.trim();
  return v === 'ok' ? 'ok' : Number(v);
})();

/**
 * Probe → the syscall it exercises and its result under the filter, written out here rather than
 * derived from DENIED_SYSCALLS, so that dropping or weakening an entry there fails this test.
 */
const EPERM_CALLS = [
  'ptrace',
  'process_vm_readv',
  'process_vm_writev',
  'pidfd_getfd',
  'kcmp',
  'process_madvise',
  'move_pages',
  'migrate_pages',
  'mbind',
  'get_mempolicy',
  'set_mempolicy',
  'set_mempolicy_home_node',
  'mount',
  'umount2',
  'pivot_root',
  'chroot',
  'open_tree',
  'move_mount',
  'fsopen',
  'fsconfig',
  'fsmount',
  'fspick',
  'mount_setattr',
  'setns',
  'keyctl',
  'add_key',
  'request_key',
  'bpf',
  'perf_event_open',
  'userfaultfd',
  'kexec_load',
  'kexec_file_load',
  'init_module',
  'finit_module',
  'delete_module',
  'reboot',
  'swapon',
  'swapoff',
  'acct',
  'quotactl',
  'quotactl_fd',
  'lookup_dcookie',
  'syslog',
  'uselib',
  'vhangup',
  'nfsservctl',
  'sethostname',
  'setdomainname',
  'fanotify_init',
  'open_by_handle_at',
  'name_to_handle_at',
  'iopl',
  'ioperm',
  'modify_ldt',
  'clock_settime',
  'settimeofday',
  'adjtimex',
  'clock_adjtime',
];
const EXPECTED: Record<string, { name: string; want: number | 'ok' }> = {
  ...Object.fromEntries(EPERM_CALLS.map((n) => [n, { name: n, want: EPERM }])),
  clone3: { name: 'clone3', want: ENOSYS },
  io_uring_setup: { name: 'io_uring_setup', want: ENOSYS },
  io_uring_enter: { name: 'io_uring_enter', want: ENOSYS },
  io_uring_register: { name: 'io_uring_register', want: ENOSYS },
  io_setup: { name: 'io_setup', want: ENOSYS },
  memfd_secret: { name: 'memfd_secret', want: ENOSYS },
  // Landlock only lets a process restrict itself further: allowed (it answers its ABI version, or EOPNOTSUPP where the LSM is off).
  landlock: { name: 'landlock_create_ruleset', want: LANDLOCK_VERDICT },
  unshare: { name: 'unshare', want: EPERM },
  clone_newuser: { name: 'clone', want: EPERM },
  clone_newnet: { name: 'clone', want: EPERM },
  clone_plain: { name: 'clone', want: 0 },
  personality_no_aslr: { name: 'personality', want: EPERM },
  personality_read_implies_exec: { name: 'personality', want: EPERM },
  personality_query: { name: 'personality', want: 'ok' },
  personality_linux: { name: 'personality', want: 'ok' },
  personality_linux32: { name: 'personality', want: 'ok' },
  ioctl_tiocsti: { name: 'ioctl', want: EPERM },
  ioctl_tiocsti_high_word: { name: 'ioctl', want: EPERM },
  ioctl_tioclinux: { name: 'ioctl', want: EPERM },
  ioctl_tcgets: { name: 'ioctl', want: 25 }, // ENOTTY: stdin is /dev/null, the request went through
  socket_unix: { name: 'socket', want: 'ok' },
  socket_inet: { name: 'socket', want: 'ok' },
  socket_inet6: { name: 'socket', want: 'ok' },
  socket_netlink: { name: 'socket', want: 'ok' },
  socket_packet: { name: 'socket', want: EAFNOSUPPORT },
  socket_alg: { name: 'socket', want: EAFNOSUPPORT },
  socket_vsock: { name: 'socket', want: EAFNOSUPPORT },
  x32_getpid: { name: 'x32', want: -31 }, // SIGSYS
  i386_getpid: { name: 'i386', want: -31 },
};
// --- a classic-BPF interpreter: what the kernel does with the program, for both architectures ---

interface SeccompData {
  nr: number;
  arch: number;
  args?: bigint[];
}

function runFilter(prog: SockFilter[], d: SeccompData): number {
  const word = (k: number): number => {
    if (k === 0) return d.nr >>> 0;
    if (k === 4) return d.arch >>> 0;
    if (k >= 16 && k < 64 && k % 4 === 0) {
      const v = d.args?.[Math.floor((k - 16) / 8)] ?? 0n;
      return Number((k % 8 === 0 ? v : v >> 32n) & 0xffffffffn);
    }
    throw new Error(`load at ${k}`);
  };
  let a = 0;
  for (let pc = 0, steps = 0; steps < 10_000; steps++) {
    const i = prog[pc];
    if (!i) throw new Error(`fell off the program at ${pc}`);
    const jump = (cond: boolean): number => pc + 1 + (cond ? i.jt : i.jf);
    switch (i.code) {
      case 0x20:
        a = word(i.k);
        pc++;
        break;
      case 0x15:
        pc = jump(a === i.k);
        break;
      case 0x35:
        pc = jump(a >= i.k);
        break;
      case 0x45:
        pc = jump((a & i.k) !== 0);
        break;
      case 0x05:
        pc = pc + 1 + i.k;
        break;
      case 0x06:
        return i.k >>> 0;
      default:
        throw new Error(`opcode ${i.code}`);
    }
  }
  throw new Error('no return');
}

describe.each<[SeccompArch]>([['x64'], ['arm64']])('seccomp program for %s (interpreted)', (arch) => {
  const prog = decodeProgram(seccompProgram(arch));
  const AR = AUDIT_ARCH[arch];
  const nr = (name: string): number => syscallNumber(name, arch)!;
  const verdict = (name: string | number, args: Array<number | bigint> = []): number =>
    runFilter(prog, { nr: typeof name === 'number' ? name : nr(name), arch: AR, args: args.map(BigInt) });

  it('denies every unconditional entry of the deny list with its errno, and allows all other calls with zero arguments', () => {
    const denied = new Map<number, number>();
    for (const r of DENIED_SYSCALLS) {
      const n = syscallNumber(r.name, arch);
      if (n !== undefined && !r.when) denied.set(n, errnoRet(r.errno === 'EPERM' ? EPERM : r.errno === 'ENOSYS' ? ENOSYS : EAFNOSUPPORT));
    }
    expect(denied.size).toBeGreaterThan(55);
    for (let n = 0; n < 600; n++) expect(verdict(n), `syscall ${n}`).toBe(denied.get(n) ?? SECCOMP_RET.ALLOW);
    for (const n of EPERM_CALLS) if (syscallNumber(n, arch) !== undefined) expect(verdict(n), n).toBe(errnoRet(EPERM));
    for (const n of ['clone3', 'io_uring_setup', 'io_uring_enter', 'io_uring_register']) expect(verdict(n), n).toBe(errnoRet(ENOSYS));
  });

  it('kills on any other architecture (i386, arm32, the other 64-bit ABI)', () => {
    for (const other of [0x40000003, 0x40000028, arch === 'x64' ? AUDIT_ARCH.arm64 : AUDIT_ARCH.x64]) {
      expect(runFilter(prog, { nr: 39, arch: other })).toBe(SECCOMP_RET.KILL_PROCESS);
    }
  });

  it('clone: denied with any namespace flag, allowed for fork and threads', () => {
    // linux/sched.h: CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET
    const NEW = [0x20000, 0x2000000, 0x4000000, 0x8000000, 0x10000000, 0x20000000, 0x40000000];
    expect(CLONE_NEW_FLAGS).toBe(NEW.reduce((a, b) => a | b));
    for (let b = 0; b < 32; b++) {
      const bit = 2 ** b;
      expect(verdict('clone', [bit | 17]), `flag ${bit.toString(16)}`).toBe(NEW.includes(bit) ? errnoRet(EPERM) : SECCOMP_RET.ALLOW);
    }
    // glibc pthread_create: CLONE_VM|FS|FILES|SIGHAND|THREAD|SYSVSEM|SETTLS|PARENT_SETTID|CHILD_CLEARTID
    expect(verdict('clone', [0x3d0f00])).toBe(SECCOMP_RET.ALLOW);
    expect(verdict('clone', [0x01200011])).toBe(SECCOMP_RET.ALLOW); // fork()
  });

  it('ioctl: TIOCSTI and TIOCLINUX denied on the low 32 bits of the request; other requests allowed', () => {
    expect(verdict('ioctl', [0, 0x5412])).toBe(errnoRet(EPERM));
    expect(verdict('ioctl', [0, 0x541c])).toBe(errnoRet(EPERM));
    expect(verdict('ioctl', [0, 0x1_0000_5412n])).toBe(errnoRet(EPERM));
    expect(verdict('ioctl', [0, 0x5401])).toBe(SECCOMP_RET.ALLOW);
    expect(verdict('ioctl', [0x5412, 0])).toBe(SECCOMP_RET.ALLOW);
  });

  it("personality: Docker's values allowed, flags that weaken the process denied", () => {
    for (const v of [0, 8, 0x20000, 0x20008, 0xffffffff]) expect(verdict('personality', [v])).toBe(SECCOMP_RET.ALLOW);
    for (const v of [0x40000, 0x400000, 0x100000, 0x0040008, 1]) expect(verdict('personality', [v]), v.toString(16)).toBe(errnoRet(EPERM));
  });

  it('socket: Unix, IPv4, IPv6 and netlink allowed; other families get EAFNOSUPPORT', () => {
    for (const f of [0, 1, 2, 10, 16]) expect(verdict('socket', [f, 1, 0])).toBe(SECCOMP_RET.ALLOW);
    for (const f of [3, 17, 38, 40, 44]) expect(verdict('socket', [f, 1, 0])).toBe(errnoRet(EAFNOSUPPORT));
  });

  if (arch === 'x64') {
    it('x86_64: x32 syscall numbers kill the process; nr -1 (a skipped call) passes', () => {
      expect(runFilter(prog, { nr: 0x40000000 + 39, arch: AR })).toBe(SECCOMP_RET.KILL_PROCESS);
      expect(runFilter(prog, { nr: 0x40000000 + 101, arch: AR })).toBe(SECCOMP_RET.KILL_PROCESS);
      expect(runFilter(prog, { nr: -1, arch: AR })).toBe(SECCOMP_RET.ALLOW);
    });
  }

  it('is small and only jumps forward inside the program', () => {
    expect(prog.length).toBeLessThan(200);
    prog.forEach((i, pc) => {
      if ((i.code & 0x07) === 0x05) expect(pc + 1 + Math.max(i.jt, i.jf, i.code === 0x05 ? i.k : 0)).toBeLessThan(prog.length);
    });
  });
});

describe('syscall numbers match libseccomp (scmp_sys_resolver, Debian package "seccomp")', () => {
  it.each([
    ['x86_64', 0],
    ['aarch64', 1],
  ] as const)('%s', (arch, col) => {
    const names = Object.keys(SYSCALL_NUMBERS);
    const r = spawnSync('bash', ['-c', `for n in ${names.join(' ')}; do scmp_sys_resolver -a ${arch} $n || echo missing; done`], {
      encoding: 'utf8',
    });
    expect(r.stderr, 'install the "seccomp" package (scripts/setup.sh)').not.toMatch(/not found/);
    const got = r.stdout.trim().split('\n').map(Number);
    expect(got).toHaveLength(names.length);
    names.forEach((n, i) => {
      const want = SYSCALL_NUMBERS[n][col];
      // libseccomp answers a negative pseudo-number for calls the architecture does not have.
      expect(want === null ? got[i] < 0 : got[i] === want, `${n} on ${arch}: resolver ${got[i]}, table ${want}`).toBe(true);
    });
    for (const d of DENIED_SYSCALLS) expect(SYSCALL_NUMBERS[d.name], d.name).toBeDefined();
  });
});

// --- real bwrap, real kernel ---

interface Run {
  code: number | null;
  signal: string | null;
  stdout: string;
  stderr: string;
}

/** Runs `cmd` in a minimal bwrap sandbox (as the sandbox user when root), optionally hardened. */
function bwrap(
  cmd: string[],
  opts: { harden?: boolean; extra?: string[]; binds?: Array<[string, string]>; env?: Record<string, string> } = {},
): Promise<Run> {
  const SECCOMP_FD = 5;
  const a = [
    '--unshare-user',
    '--unshare-pid',
    '--unshare-ipc',
    '--unshare-uts',
    '--unshare-net',
    '--die-with-parent',
    '--new-session',
    '--clearenv',
  ];
  a.push('--ro-bind', '/usr', '/usr');
  for (const p of ['/bin', '/sbin', '/lib', '/lib64']) {
    const st = fs.lstatSync(p, { throwIfNoEntry: false });
    if (st?.isSymbolicLink()) a.push('--symlink', fs.readlinkSync(p), p);
    else if (st?.isDirectory()) a.push('--ro-bind', p, p);
  }
  a.push('--ro-bind', '/etc', '/etc', '--proc', '/proc', '--dev', '/dev', '--tmpfs', '/tmp');
  for (const [from, to] of opts.binds ?? []) a.push('--ro-bind', from, to);
  a.push('--setenv', 'PATH', '/usr/local/bin:/usr/bin:/bin', '--setenv', 'HOME', '/tmp', '--chdir', '/tmp');
  for (const [k, v] of Object.entries(opts.env ?? {})) a.push('--setenv', k, v);
  if (opts.harden) a.push(...bwrapHardeningArgs(SECCOMP_FD));
  a.push(...(opts.extra ?? []), ...cmd);
  const child = spawn('bwrap', a, {
    ...ids,
    env: { PATH: '/usr/bin:/bin' },
    stdio: ['ignore', 'pipe', 'pipe', 'ignore', 'ignore', 'pipe'],
  });
  (child.stdio[SECCOMP_FD] as Writable).on('error', () => undefined).end(opts.harden ? seccompProgram() : Buffer.alloc(0));
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (d: Buffer) => (stdout += d));
  child.stderr!.on('data', (d: Buffer) => (stderr += d));
  return new Promise((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code, signal) => resolve({ code, signal, stdout, stderr }));
  });
}

const dir = testRoot('seccomp');
beforeAll(() => {
  fs.mkdirSync(dir, { recursive: true, mode: 0o755 });
  fs.chmodSync(dir, 0o755);
  for (const f of ['seccomp-probe.py', 'load-docker-profile.py']) fs.copyFileSync(path.join(FIXTURES, f), path.join(dir, f));
  for (const f of fs.readdirSync(dir)) fs.chmodSync(path.join(dir, f), 0o644);
});
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

const probeArgs = (): string[] => {
  const nrs = Object.fromEntries(
    Object.keys(SYSCALL_NUMBERS).flatMap((n) => (syscallNumber(n, 'x64') === undefined ? [] : [[n, syscallNumber(n, 'x64')]])),
  );
  // Allowed calls the probe tries too (x86_64 numbers, scmp_sys_resolver).
  return [PY, '/probe/seccomp-probe.py', JSON.stringify({ ...nrs, landlock_create_ruleset: 444 })];
};

/** Probes whose unfiltered result differs from the filtered one on any kernel (the control). */
const CONTROL = [
  'io_setup',
  'ptrace',
  'process_vm_readv',
  'pidfd_getfd',
  'mount',
  'chroot',
  'unshare',
  'clone_newuser',
  'setns',
  'clone3',
  'keyctl',
  'add_key',
  'bpf',
  'perf_event_open',
  'userfaultfd',
  'open_by_handle_at',
  'clock_settime',
  'personality_no_aslr',
  'ioctl_tiocsti',
  'ioctl_tiocsti_high_word',
];

describe.skipIf(!x64)('bwrap with the filter (real kernel, x86_64)', () => {
  let filtered: Record<string, number | string>;
  let unfiltered: Record<string, number | string>;
  beforeAll(async () => {
    const binds: Array<[string, string]> = [[dir, '/probe']];
    const [on, off] = await Promise.all([bwrap(probeArgs(), { harden: true, binds }), bwrap(probeArgs(), { binds })]);
    expect(on.code, on.stderr).toBe(0);
    expect(off.code, off.stderr).toBe(0);
    filtered = JSON.parse(on.stdout) as typeof filtered;
    unfiltered = JSON.parse(off.stdout) as typeof unfiltered;
  });

  it('every denied syscall is refused from inside, with its errno', () => {
    const wrong = Object.entries(EXPECTED)
      .filter(([k, e]) => filtered[k] !== e.want)
      .map(([k, e]) => `${k}: got ${filtered[k]}, want ${e.want}`);
    observed('filtered probe', filtered);
    expect(wrong).toEqual([]);
  });

  it('the same calls get through without the filter (the probe can tell)', () => {
    observed('unfiltered probe', unfiltered);
    for (const k of CONTROL) expect(unfiltered[k], k).not.toBe(filtered[k]);
  });

  it('every entry of the deny list that exists on x86_64 has a probe', () => {
    const probed = new Set(Object.values(EXPECTED).map((e) => e.name));
    for (const r of DENIED_SYSCALLS) if (syscallNumber(r.name, 'x64') !== undefined) expect(probed.has(r.name), r.name).toBe(true);
  });

  it('--disable-userns alone stops nested user namespaces (unshare -U fails), which work without it', async () => {
    const cmd = ['bash', '-c', 'unshare -U true && echo NESTED-OK'];
    const [off, on] = await Promise.all([bwrap(cmd), bwrap(cmd, { extra: ['--disable-userns'] })]);
    observed('unshare -U with --disable-userns', on.stderr);
    expect(off.stdout).toContain('NESTED-OK');
    expect(on.stdout).not.toContain('NESTED-OK');
    expect(on.stderr).toMatch(/unshare failed/);
  });

  it('ordinary work runs under the filter: bash, python threads and subprocesses, pip, git, gcc, node', async () => {
    const script = [
      'set -e',
      'git init -q repo && cd repo && echo hi > f && git add f && git -c user.email=a@b -c user.name=a commit -qm init && git log --oneline | wc -l',
      `${PY} -c "import threading, subprocess, concurrent.futures as cf, multiprocessing as mp, ssl, socket
t = threading.Thread(target=print, args=('thread',)); t.start(); t.join()
print(subprocess.run(['echo', 'sub'], capture_output=True, text=True).stdout.strip())
print(sum(cf.ThreadPoolExecutor(4).map(abs, range(-10, 0))))
with mp.Pool(2) as p: print(sum(p.map(abs, [-1, -2])))
s = socket.socket(); s.close(); socket.socketpair()"`,
      `${PY} -m pip --version >/dev/null && echo pip`,
      "printf 'int main(void){return 0;}' > a.c && (command -v gcc >/dev/null && gcc a.c -o a && ./a && echo gcc || echo gcc)",
      `node -e "const {Worker}=require('worker_threads'); const cp=require('child_process');
new Worker('require(\\'worker_threads\\').parentPort.postMessage(1)',{eval:true}).on('message',()=>{
require('fs').promises.readFile('/etc/hostname').then(()=>console.log('node', cp.execFileSync('echo',['x']).toString().trim()))})"`,
      'echo DONE',
    ].join('\n');
    const r = await bwrap(['bash', '-c', script], { harden: true });
    observed('ordinary work under the filter', r.stdout + r.stderr);
    expect(r.stderr).toBe('');
    expect(r.stdout.split('\n')).toEqual(['1', 'thread', 'sub', '55', '3', 'pip', 'gcc', 'node x', 'DONE', '']);
  });
});

describe.skipIf(!x64)("Apptainer's profile, loaded with libseccomp as Apptainer loads it (Apptainer is not installed here)", () => {
  it('denies the same calls with EPERM, except clone3 (left to glibc) and the personality query', async () => {
    const profile = installApptainerSeccomp(dir);
    fs.chmodSync(profile, 0o644);
    const r = await bwrap([PY, '/probe/load-docker-profile.py', `/probe/seccomp/${path.basename(profile)}`, ...probeArgs()], {
      binds: [[dir, '/probe']],
    });
    expect(r.code, r.stderr).toBe(0);
    const got = JSON.parse(r.stdout) as Record<string, number | string>;
    observed('apptainer profile probe', got);
    const wrong: string[] = [];
    for (const [k, e] of Object.entries(EXPECTED)) {
      let want = e.want === ENOSYS || e.want === EAFNOSUPPORT ? EPERM : e.want;
      if (k === 'clone3') want = 22; // EINVAL for a NULL clone_args: not filtered
      if (k === 'personality_query') want = EPERM;
      if (got[k] !== want) wrong.push(`${k}: got ${got[k]}, want ${want}`);
    }
    expect(wrong).toEqual([]);
  });

  it('names only the native architecture and argument checks libseccomp accepts', () => {
    const p = apptainerSeccompProfile('x64') as {
      defaultAction: string;
      architectures: string[];
      syscalls: Array<{ names: string[]; args?: unknown[] }>;
    };
    expect(p.defaultAction).toBe('SCMP_ACT_ALLOW');
    expect(p.architectures).toEqual(['SCMP_ARCH_X86_64']);
    expect(p.syscalls.every((s) => (s.args?.length ?? 0) <= 1)).toBe(true);
    expect(p.syscalls.flatMap((s) => s.names)).not.toContain('clone3');
    expect((apptainerSeccompProfile('arm64') as { architectures: string[] }).architectures).toEqual(['SCMP_ARCH_AARCH64']);
  });
});

describe('apptainer command line with hardening', () => {
  const base = {
    binary: 'apptainer',
    image: '/i.sif',
    workspace: '/w',
    run: '/r',
    toolServer: '/t',
    network: false,
    env: {},
    command: ['node', 'main.js'],
  };
  it('adds --no-privs, --no-mount hostfs, --no-eval and the seccomp profile before the image', () => {
    const a = apptainerArgs({ ...base, fakeroot: false, hardening: { seccompProfile: '/var/tmp/raas/seccomp/apptainer-x.json' } });
    expect(a.slice(0, 7)).toEqual(['exec', '--containall', '--writable-tmpfs', '--net', '--network', 'none', '--bind']);
    const at = a.indexOf('--no-privs');
    expect(a.slice(at, at + 6)).toEqual([
      '--no-privs',
      '--no-mount',
      'hostfs',
      '--no-eval',
      '--security',
      'seccomp:/var/tmp/raas/seccomp/apptainer-x.json',
    ]);
    expect(a.slice(-3)).toEqual(['/i.sif', 'node', 'main.js']);
    expect(a).not.toContain('--userns');
  });
  it('keeps capabilities under --fakeroot (that is what it is for), adds --userns on request', () => {
    const a = apptainerArgs({ ...base, fakeroot: true, hardening: { userns: true } });
    expect(a).toContain('--fakeroot');
    expect(a).not.toContain('--no-privs');
    expect(a).toContain('--userns');
    expect(a.join(' ')).not.toContain('seccomp:');
  });
  it('without hardening, the command line is unchanged', () => {
    expect(apptainerArgs({ ...base, fakeroot: false })).not.toContain('--no-privs');
  });
});

// --- the execute-only node that runs the tool server ---

/** Starts `target` (SECRET in its environment) from python, then attacks it from that parent. */
const ATTACK = `
import ctypes, json, os, subprocess, sys, time
libc = ctypes.CDLL(None, use_errno=True)
p = subprocess.Popen([sys.argv[1], '-e', 'setInterval(() => {}, 1000)'], env={'SECRET': 'hunter2-raas'})
for _ in range(200):
    try:
        if open(f'/proc/{p.pid}/comm').read().strip() == 'node': break
    except OSError: pass
    time.sleep(0.01)
time.sleep(0.2)
r = {}
try: r['environ'] = b'hunter2-raas' in open(f'/proc/{p.pid}/environ', 'rb').read()
except OSError as e: r['environ'] = e.strerror
try: r['fd'] = len(os.listdir(f'/proc/{p.pid}/fd')) > 0
except OSError as e: r['fd'] = e.strerror
try: r['exe'] = os.readlink(f'/proc/{p.pid}/exe') != ''
except OSError as e: r['exe'] = e.strerror
try:
    start = int(open(f'/proc/{p.pid}/maps').readline().split('-')[0], 16)
    with open(f'/proc/{p.pid}/mem', 'rb') as m:
        m.seek(start); r['mem'] = len(m.read(16)) == 16
except OSError as e: r['mem'] = e.strerror
rc = libc.ptrace(ctypes.c_long(16), ctypes.c_long(p.pid), None, None)  # PTRACE_ATTACH
r['ptrace'] = True if rc == 0 else os.strerror(ctypes.get_errno())
if rc == 0:
    os.waitpid(p.pid, 0); libc.ptrace(ctypes.c_long(17), ctypes.c_long(p.pid), None, None)
pidfd = os.pidfd_open(p.pid)
fd = libc.syscall(ctypes.c_long(438), ctypes.c_long(pidfd), ctypes.c_long(0), ctypes.c_long(0))  # pidfd_getfd
r['pidfd_getfd'] = True if fd >= 0 else os.strerror(ctypes.get_errno())
p.kill(); p.wait()
print(json.dumps(r))
`;

describe('execute-only node for the tool server (no seccomp: the kernel alone)', () => {
  let install: string;
  beforeAll(() => {
    install = installToolServer(dir, { node: process.execPath });
  });

  it('is installed execute-only (0711 root-owned as root, 0111 otherwise), reused, and hard-linked into the install', () => {
    const node = path.join(install, SANDBOX_NODE);
    const st = fs.statSync(node);
    expect(st.mode & 0o7777).toBe(asRoot ? 0o711 : 0o111);
    if (asRoot) expect(st.uid).toBe(0);
    expect(st.size).toBe(fs.statSync(process.execPath).size);
    expect(st.nlink).toBe(2);
    expect(installToolServer(dir, { node: process.execPath })).toBe(install);
    expect(fs.statSync(node).ino).toBe(st.ino);
  });

  it('same-uid processes in the sandbox cannot read its environ, fds, exe or memory, ptrace it, or take its fds; they can a readable node', async () => {
    const realNode = fs.realpathSync(process.execPath);
    const binds: Array<[string, string]> = [[install, '/opt/raas/tool-server']];
    if (!realNode.startsWith('/usr/')) binds.push([path.dirname(realNode), path.dirname(realNode)]);
    const run = (target: string): Promise<Run> => bwrap([PY, '-c', ATTACK, target], { binds });
    const [locked, open] = await Promise.all([run(`/opt/raas/tool-server/${SANDBOX_NODE}`), run(realNode)]);
    expect(locked.code, locked.stderr).toBe(0);
    expect(open.code, open.stderr).toBe(0);
    const l = JSON.parse(locked.stdout) as Record<string, unknown>;
    const o = JSON.parse(open.stdout) as Record<string, unknown>;
    observed('attacks on the execute-only node', l);
    observed('attacks on a readable node', o);
    expect(o).toEqual({ environ: true, fd: true, exe: true, mem: true, ptrace: true, pidfd_getfd: true });
    expect(l).toEqual({
      environ: 'Permission denied',
      fd: 'Permission denied',
      exe: 'Permission denied',
      mem: 'Permission denied',
      ptrace: 'Operation not permitted',
      pidfd_getfd: 'Operation not permitted',
    });
  });

  it('runs node normally from the copy: execPath, /proc/self/exe, and node-pty under the seccomp filter', async () => {
    const js = `const pty = require('/opt/raas/tool-server/node_modules/node-pty');
const fs = require('fs');
console.log(process.execPath, fs.readlinkSync('/proc/self/exe'));
const p = pty.spawn('/bin/bash', ['-c', 'echo pty-$((6*7))'], { cols: 80, rows: 24, cwd: '/tmp', env: { PATH: '/usr/bin:/bin' } });
let out = ''; p.onData((d) => (out += d)); p.onExit(({ exitCode }) => { console.log(out.trim(), exitCode); });`;
    const r = await bwrap([`/opt/raas/tool-server/${SANDBOX_NODE}`, '-e', js], {
      harden: true,
      binds: [[install, '/opt/raas/tool-server']],
    });
    expect(r.stderr).toBe('');
    expect(r.stdout).toBe(`/opt/raas/tool-server/${SANDBOX_NODE} /opt/raas/tool-server/${SANDBOX_NODE}\npty-42 0\n`);
  });
});
