import { RaasError } from '../../protocol/errors.js';

/**
 * The seccomp filter of bwrap sandboxes, generated here as a classic-BPF program (no libseccomp):
 * everything is allowed except the kernel interfaces below, the same families Flatpak's and
 * Docker's default profiles close (process inspection, namespaces and mounts, keyrings, BPF, perf,
 * module loading, clock and system administration), plus io_uring. bwrap loads it with
 * `--seccomp FD`.
 */

/** Architectures the program knows; any other `seccomp_data.arch` kills the process. */
export type SeccompArch = 'x64' | 'arm64';

/** errno a denied call returns. */
type DenyErrno = 'EPERM' | 'ENOSYS' | 'EAFNOSUPPORT';

/**
 * A condition on one argument, compared on its low 32 bits (the kernel reads these arguments as
 * `int`/`unsigned int`, so the high word is ignored by the kernel too, as in Flatpak's filter).
 */
type ArgCondition =
  /** Denied when any of these bits is set. */
  | { arg: number; anyBit: number }
  /** Denied when the argument is one of these values. */
  | { arg: number; equals: readonly number[] }
  /** Denied unless the argument is one of these values. */
  | { arg: number; notIn: readonly number[] };

/** One entry of the deny list. */
export interface DeniedSyscall {
  name: string;
  errno: DenyErrno;
  /** Only calls matching this are denied; absent means every call. */
  when?: ArgCondition;
  /** Why it is denied, for docs/security.md and /status. */
  why: string;
}

/** `clone` flags that create namespaces (CLONE_NEWNS|NEWCGROUP|NEWUTS|NEWIPC|NEWUSER|NEWPID|NEWNET). */
export const CLONE_NEW_FLAGS = 0x7e020000;
const TIOCSTI = 0x5412;
const TIOCLINUX = 0x541c;
/** personality() values Docker's default profile allows: PER_LINUX, PER_LINUX32, UNAME26 (+32), query. */
const PERSONALITY_ALLOWED = [0x0, 0x8, 0x20000, 0x20008, 0xffffffff] as const;
/** AF_UNSPEC, AF_UNIX, AF_INET, AF_INET6, AF_NETLINK: Flatpak's socket-family allowlist. */
const SOCKET_FAMILIES_ALLOWED = [0, 1, 2, 10, 16] as const;

const PTRACE = 'reads or writes another process of the sandbox (the tool server runs as the same user)';
const MOUNT = 'changes the mount table; the sandbox has no reason to';
const NS = 'enters or creates namespaces (new user namespaces are the usual first step of a kernel exploit)';
const KEYS = 'the kernel keyring is not namespaced: keys would be shared with the host user';
const ADMIN = 'system administration; needs privileges the sandbox never has, so only kernel attack surface is left';
const CLOCK = 'sets the system clock';

/** The deny list, one entry per syscall. */
export const DENIED_SYSCALLS: readonly DeniedSyscall[] = [
  { name: 'ptrace', errno: 'EPERM', why: PTRACE },
  { name: 'process_vm_readv', errno: 'EPERM', why: PTRACE },
  { name: 'process_vm_writev', errno: 'EPERM', why: PTRACE },
  { name: 'pidfd_getfd', errno: 'EPERM', why: "copies another process's file descriptors" },
  { name: 'kcmp', errno: 'EPERM', why: 'compares kernel objects of other processes (an information leak)' },
  { name: 'process_madvise', errno: 'EPERM', why: PTRACE },
  { name: 'move_pages', errno: 'EPERM', why: 'moves pages of other processes' },
  { name: 'migrate_pages', errno: 'EPERM', why: 'moves pages of other processes' },
  { name: 'mbind', errno: 'EPERM', why: 'NUMA policy; denied by Flatpak and Docker' },
  { name: 'get_mempolicy', errno: 'EPERM', why: 'NUMA policy; denied by Flatpak and Docker' },
  { name: 'set_mempolicy', errno: 'EPERM', why: 'NUMA policy; denied by Flatpak and Docker' },
  { name: 'set_mempolicy_home_node', errno: 'EPERM', why: 'NUMA policy; denied by Docker' },
  { name: 'mount', errno: 'EPERM', why: MOUNT },
  { name: 'umount2', errno: 'EPERM', why: MOUNT },
  { name: 'pivot_root', errno: 'EPERM', why: MOUNT },
  { name: 'chroot', errno: 'EPERM', why: MOUNT },
  { name: 'open_tree', errno: 'EPERM', why: MOUNT + ' (new mount API, CVE-2021-41133)' },
  { name: 'move_mount', errno: 'EPERM', why: MOUNT + ' (new mount API)' },
  { name: 'fsopen', errno: 'EPERM', why: MOUNT + ' (new mount API)' },
  { name: 'fsconfig', errno: 'EPERM', why: MOUNT + ' (new mount API)' },
  { name: 'fsmount', errno: 'EPERM', why: MOUNT + ' (new mount API)' },
  { name: 'fspick', errno: 'EPERM', why: MOUNT + ' (new mount API)' },
  { name: 'mount_setattr', errno: 'EPERM', why: MOUNT + ' (new mount API)' },
  { name: 'unshare', errno: 'EPERM', why: NS },
  { name: 'setns', errno: 'EPERM', why: NS },
  { name: 'clone', errno: 'EPERM', when: { arg: 0, anyBit: CLONE_NEW_FLAGS }, why: NS + '; plain fork and threads are allowed' },
  {
    name: 'clone3',
    errno: 'ENOSYS',
    why: 'its flags sit behind a pointer seccomp cannot read; ENOSYS makes glibc fall back to clone(), which is checked',
  },
  { name: 'keyctl', errno: 'EPERM', why: KEYS },
  { name: 'add_key', errno: 'EPERM', why: KEYS },
  { name: 'request_key', errno: 'EPERM', why: KEYS },
  { name: 'bpf', errno: 'EPERM', why: 'eBPF verifier and maps: a large, often exploited kernel surface' },
  { name: 'perf_event_open', errno: 'EPERM', why: 'performance counters: a large, often exploited kernel surface and a side channel' },
  { name: 'userfaultfd', errno: 'EPERM', why: 'lets a process stall the kernel on a page fault, the usual tool for winning kernel races' },
  {
    name: 'io_uring_setup',
    errno: 'ENOSYS',
    why: 'io_uring: disabled by Google on ChromeOS, Android and its servers for its exploit record; callers fall back to normal I/O',
  },
  { name: 'io_uring_enter', errno: 'ENOSYS', why: 'io_uring (see io_uring_setup)' },
  { name: 'io_uring_register', errno: 'ENOSYS', why: 'io_uring (see io_uring_setup)' },
  {
    name: 'io_setup',
    errno: 'ENOSYS',
    why: 'Linux AIO (io_submit and the rest need a context from it): a kernel surface with a record of bugs, denied by Docker before 5.x kernels; libaio users fall back to normal I/O',
  },
  {
    name: 'memfd_secret',
    errno: 'ENOSYS',
    why: 'memory removed from the kernel direct map, which not even the host can inspect; nothing a task needs',
  },
  { name: 'kexec_load', errno: 'EPERM', why: ADMIN },
  { name: 'kexec_file_load', errno: 'EPERM', why: ADMIN },
  { name: 'init_module', errno: 'EPERM', why: ADMIN },
  { name: 'finit_module', errno: 'EPERM', why: ADMIN },
  { name: 'delete_module', errno: 'EPERM', why: ADMIN },
  { name: 'reboot', errno: 'EPERM', why: ADMIN },
  { name: 'swapon', errno: 'EPERM', why: ADMIN },
  { name: 'swapoff', errno: 'EPERM', why: ADMIN },
  { name: 'acct', errno: 'EPERM', why: ADMIN },
  { name: 'quotactl', errno: 'EPERM', why: ADMIN },
  { name: 'quotactl_fd', errno: 'EPERM', why: ADMIN },
  { name: 'lookup_dcookie', errno: 'EPERM', why: ADMIN },
  { name: 'syslog', errno: 'EPERM', why: 'reads the kernel log (addresses that defeat KASLR)' },
  { name: 'uselib', errno: 'EPERM', why: 'obsolete (a.out libraries)' },
  { name: 'vhangup', errno: 'EPERM', why: ADMIN },
  { name: 'nfsservctl', errno: 'EPERM', why: 'obsolete' },
  { name: 'sethostname', errno: 'EPERM', why: ADMIN },
  { name: 'setdomainname', errno: 'EPERM', why: ADMIN },
  { name: 'fanotify_init', errno: 'EPERM', why: 'filesystem-wide event monitoring' },
  { name: 'open_by_handle_at', errno: 'EPERM', why: 'opens files by handle, bypassing path checks (the "shocker" container escape)' },
  { name: 'name_to_handle_at', errno: 'EPERM', why: 'produces handles for open_by_handle_at' },
  { name: 'iopl', errno: 'EPERM', why: 'raw I/O port access' },
  { name: 'ioperm', errno: 'EPERM', why: 'raw I/O port access' },
  { name: 'modify_ldt', errno: 'EPERM', why: '16-bit segments; a history of kernel information leaks' },
  { name: 'clock_settime', errno: 'EPERM', why: CLOCK },
  { name: 'settimeofday', errno: 'EPERM', why: CLOCK },
  { name: 'adjtimex', errno: 'EPERM', why: CLOCK },
  { name: 'clock_adjtime', errno: 'EPERM', why: CLOCK },
  {
    name: 'personality',
    errno: 'EPERM',
    when: { arg: 0, notIn: PERSONALITY_ALLOWED },
    why: "execution-domain flags that weaken the process (no ASLR, READ_IMPLIES_EXEC, MMAP_PAGE_ZERO); Docker's allowed values stay allowed",
  },
  {
    name: 'ioctl',
    errno: 'EPERM',
    when: { arg: 1, equals: [TIOCSTI, TIOCLINUX] },
    why: 'TIOCSTI and TIOCLINUX push keystrokes into a terminal (CVE-2017-5226); every other ioctl is allowed',
  },
  {
    name: 'socket',
    errno: 'EAFNOSUPPORT',
    when: { arg: 0, notIn: SOCKET_FAMILIES_ALLOWED },
    why: 'socket families other than Unix, IPv4, IPv6 and netlink (AF_PACKET, AF_VSOCK, AF_ALG, ...): rarely needed, often exploited',
  },
];

/**
 * Syscall numbers, [x86_64, aarch64] (null: the call does not exist there). Checked against
 * libseccomp's `scmp_sys_resolver` by test/sandbox/seccomp.test.ts.
 */
export const SYSCALL_NUMBERS: Readonly<Record<string, readonly [number, number | null]>> = {
  ptrace: [101, 117],
  process_vm_readv: [310, 270],
  process_vm_writev: [311, 271],
  pidfd_getfd: [438, 438],
  kcmp: [312, 272],
  process_madvise: [440, 440],
  move_pages: [279, 239],
  migrate_pages: [256, 238],
  mbind: [237, 235],
  get_mempolicy: [239, 236],
  set_mempolicy: [238, 237],
  set_mempolicy_home_node: [450, 450],
  mount: [165, 40],
  umount2: [166, 39],
  pivot_root: [155, 41],
  chroot: [161, 51],
  open_tree: [428, 428],
  move_mount: [429, 429],
  fsopen: [430, 430],
  fsconfig: [431, 431],
  fsmount: [432, 432],
  fspick: [433, 433],
  mount_setattr: [442, 442],
  unshare: [272, 97],
  setns: [308, 268],
  clone: [56, 220],
  clone3: [435, 435],
  keyctl: [250, 219],
  add_key: [248, 217],
  request_key: [249, 218],
  bpf: [321, 280],
  perf_event_open: [298, 241],
  userfaultfd: [323, 282],
  io_uring_setup: [425, 425],
  io_uring_enter: [426, 426],
  io_uring_register: [427, 427],
  io_setup: [206, 0],
  memfd_secret: [447, 447],
  kexec_load: [246, 104],
  kexec_file_load: [320, 294],
  init_module: [175, 105],
  finit_module: [313, 273],
  delete_module: [176, 106],
  reboot: [169, 142],
  swapon: [167, 224],
  swapoff: [168, 225],
  acct: [163, 89],
  quotactl: [179, 60],
  quotactl_fd: [443, 443],
  lookup_dcookie: [212, 18],
  syslog: [103, 116],
  uselib: [134, null],
  vhangup: [153, 58],
  nfsservctl: [180, 42],
  sethostname: [170, 161],
  setdomainname: [171, 162],
  fanotify_init: [300, 262],
  open_by_handle_at: [304, 265],
  name_to_handle_at: [303, 264],
  iopl: [172, null],
  ioperm: [173, null],
  modify_ldt: [154, null],
  clock_settime: [227, 112],
  settimeofday: [164, 170],
  adjtimex: [159, 171],
  clock_adjtime: [305, 266],
  personality: [135, 92],
  ioctl: [16, 29],
  socket: [41, 198],
};

/** `seccomp_data.arch` values (AUDIT_ARCH_*). */
export const AUDIT_ARCH: Readonly<Record<SeccompArch, number>> = { x64: 0xc000003e, arm64: 0xc00000b7 };
/** x32 syscalls on x86_64 carry this bit in their number. */
const X32_SYSCALL_BIT = 0x40000000;
const ERRNO: Readonly<Record<DenyErrno, number>> = { EPERM: 1, ENOSYS: 38, EAFNOSUPPORT: 97 };

/** SECCOMP_RET_* actions. */
export const SECCOMP_RET = { KILL_PROCESS: 0x80000000, ERRNO: 0x00050000, ALLOW: 0x7fff0000 } as const;

// Classic BPF opcodes (linux/filter.h).
const LD_W_ABS = 0x20;
const JMP_JA = 0x05;
const JMP_JEQ_K = 0x15;
const JMP_JGE_K = 0x35;
const JMP_JSET_K = 0x45;
const RET_K = 0x06;
/** Offsets in struct seccomp_data: nr, arch, args[i] (low word on little-endian). */
const OFF_NR = 0;
const OFF_ARCH = 4;
const argLow = (i: number): number => 16 + 8 * i;

/** The syscall number of `name` on `arch`, or undefined when the call does not exist there. */
export function syscallNumber(name: string, arch: SeccompArch): number | undefined {
  const row = SYSCALL_NUMBERS[name];
  if (!row) throw new Error(`no syscall number for ${name}`);
  return (arch === 'x64' ? row[0] : row[1]) ?? undefined;
}

/** Maps `process.arch` to the program's architecture; throws for one it does not cover. */
export function seccompArch(arch: string = process.arch): SeccompArch {
  if (arch === 'x64' || arch === 'arm64') return arch;
  throw new RaasError(
    'sandbox_unavailable',
    `no seccomp filter for CPU architecture "${arch}" (only x64 and arm64): set sandbox.seccomp to false to run bwrap sandboxes without it`,
    {
      retryable: false,
    },
  );
}

/**
 * The filter as bwrap reads it from `--seccomp FD`: a `struct sock_filter[]`, 8 bytes per
 * instruction (u16 code, u8 jt, u8 jf, u32 k, little endian).
 */
export function seccompProgram(arch: string = process.arch): Buffer {
  const insns = assemble(programFor(seccompArch(arch)));
  const buf = Buffer.alloc(insns.length * 8);
  insns.forEach((ins, i) => {
    buf.writeUInt16LE(ins.code, i * 8);
    buf.writeUInt8(ins.jt, i * 8 + 2);
    buf.writeUInt8(ins.jf, i * 8 + 3);
    buf.writeUInt32LE(ins.k >>> 0, i * 8 + 4);
  });
  return buf;
}

/**
 * bwrap options that harden a sandbox: no nested user namespaces (needs `--unshare-user`) and the
 * seccomp program read from `seccompFd` (write `seccompProgram()` to that fd and close it).
 */
export function bwrapHardeningArgs(seccompFd: number): string[] {
  return ['--disable-userns', '--seccomp', String(seccompFd)];
}

/** One decoded instruction. */
export interface SockFilter {
  code: number;
  jt: number;
  jf: number;
  k: number;
}

/** Decodes a program buffer (tests and `raas doctor`-style checks). */
export function decodeProgram(buf: Buffer): SockFilter[] {
  const out: SockFilter[] = [];
  for (let o = 0; o + 8 <= buf.length; o += 8) {
    out.push({ code: buf.readUInt16LE(o), jt: buf.readUInt8(o + 2), jf: buf.readUInt8(o + 3), k: buf.readUInt32LE(o + 4) });
  }
  return out;
}

// --- assembler -------------------------------------------------------------------------------

/** A jump target: a label, or `next` (fall through). */
type Target = string | 'next';
type Asm = { label: string } | { code: number; k: number; jt?: Target; jf?: Target };

const ld = (off: number): Asm => ({ code: LD_W_ABS, k: off });
const ret = (k: number): Asm => ({ code: RET_K, k });
const jeq = (k: number, jt: Target, jf: Target = 'next'): Asm => ({ code: JMP_JEQ_K, k, jt, jf });
const jge = (k: number, jt: Target, jf: Target = 'next'): Asm => ({ code: JMP_JGE_K, k, jt, jf });
const jset = (k: number, jt: Target, jf: Target = 'next'): Asm => ({ code: JMP_JSET_K, k, jt, jf });
const ja = (to: string): Asm => ({ code: JMP_JA, k: 0, jt: to });

/**
 * Layout: check the architecture, load the number once, one `jeq` per unconditional rule into a
 * shared return, then a block per argument check. Syscalls whose path never loads an argument get
 * a constant verdict, which the kernel (5.11+) caches per syscall, so allowed calls skip the filter.
 */
function programFor(arch: SeccompArch): Asm[] {
  const p: Asm[] = [ld(OFF_ARCH), jeq(AUDIT_ARCH[arch], 'next', 'kill'), ld(OFF_NR)];
  // x32 numbers reach the same kernel entry points under other numbers: refuse them all
  // (nr -1 is what a skipped syscall looks like; the kernel answers it with ENOSYS).
  if (arch === 'x64') p.push(jge(X32_SYSCALL_BIT, 'x32'));
  const blocks: Asm[] = [];
  DENIED_SYSCALLS.forEach((rule, i) => {
    const nr = syscallNumber(rule.name, arch);
    if (nr === undefined) return;
    const deny = `ret_${rule.errno}`;
    if (!rule.when) {
      p.push(jeq(nr, deny));
      return;
    }
    const c = rule.when;
    p.push(jeq(nr, `arg_${i}`));
    blocks.push({ label: `arg_${i}` }, ld(argLow(c.arg)));
    if ('anyBit' in c) blocks.push(jset(c.anyBit, deny, 'allow'));
    else if ('equals' in c) c.equals.forEach((v, j) => blocks.push(jeq(v, deny, j === c.equals.length - 1 ? 'allow' : 'next')));
    else {
      c.notIn.forEach((v) => blocks.push(jeq(v, 'allow')));
      blocks.push(ja(deny));
    }
  });
  p.push(ret(SECCOMP_RET.ALLOW), ...blocks);
  if (arch === 'x64') p.push({ label: 'x32' }, jeq(0xffffffff, 'allow', 'kill'));
  p.push({ label: 'kill' }, ret(SECCOMP_RET.KILL_PROCESS), { label: 'allow' }, ret(SECCOMP_RET.ALLOW));
  for (const e of Object.keys(ERRNO) as DenyErrno[]) p.push({ label: `ret_${e}` }, ret(SECCOMP_RET.ERRNO | ERRNO[e]));
  return p;
}

/** Resolves labels to forward offsets (classic BPF jumps only forward, at most 255 for jt/jf). */
function assemble(src: Asm[]): SockFilter[] {
  const at = new Map<string, number>();
  let n = 0;
  for (const a of src) {
    if ('label' in a) at.set(a.label, n);
    else n++;
  }
  const out: SockFilter[] = [];
  for (const a of src) {
    if ('label' in a) continue;
    const pc = out.length;
    const off = (t: Target | undefined, wide = false): number => {
      if (t === undefined || t === 'next') return 0;
      const to = at.get(t);
      if (to === undefined) throw new Error(`seccomp assembler: no label ${t}`);
      const d = to - pc - 1;
      if (d < 0 || (!wide && d > 255)) throw new Error(`seccomp assembler: jump to ${t} out of range (${d})`);
      return d;
    };
    if (a.code === JMP_JA) out.push({ code: a.code, jt: 0, jf: 0, k: off(a.jt, true) });
    else out.push({ code: a.code, jt: off(a.jt), jf: off(a.jf), k: a.k });
  }
  if (out.length > 4096) throw new Error(`seccomp program too long (${out.length} instructions)`);
  return out;
}
