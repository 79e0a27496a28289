import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net, { type Socket } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import type { Readable, Stream } from 'node:stream';
import { RaasError } from '../../protocol/errors.js';
import { findBinary } from './host.js';
import { sleep, systemClock, type Clock } from '../../util/clock.js';

/**
 * User-mode networking for a sandbox that runs in its own network namespace. The helper
 * (slirp4netns or pasta) lives in the host's network namespace and relays the sandbox's TCP/UDP
 * through ordinary host sockets, so the sandbox reaches the outside but never the host's loopback:
 * 127.0.0.1 inside is the sandbox's own `lo`, abstract Unix sockets belong to the namespace, and the
 * helper refuses its host alias (slirp4netns `--disable-host-loopback`, pasta `--no-map-gw` and no
 * port forwarding). The host's own non-loopback addresses are made unreachable inside too, so
 * services bound to 0.0.0.0 on the host are not reachable through them.
 */
export type UserNetTool = 'slirp4netns' | 'pasta';

/** What the sandbox sees (for logs and the job's record). */
interface UserNetInfo {
  tool: UserNetTool;
  /** Host pid of the helper (the shim's pid, which becomes the helper for slirp4netns). */
  pid: number | undefined;
  /** The sandbox's address and gateway; for pasta, copies of the host's. */
  address: string;
  gateway: string;
  /** The resolver the sandbox's /etc/resolv.conf names (the helper forwards it to the host's). */
  dns: string;
  mtu: number;
  /** Addresses routed `unreachable` inside the sandbox. */
  denied: string[];
}

/** A running helper; close() is safe twice. */
export interface UserNet {
  describe(): UserNetInfo;
  /** Resolves once the helper has exited (after close(), or when its sandbox ended). */
  readonly exited: Promise<void>;
  close(): Promise<void>;
}

export interface UserNetOptions {
  /** Host pid of a process inside the sandbox's network namespace: bwrap's `child-pid`. */
  pid: number;
  /** The helper runs as the sandbox user (the server may be root); default: our own uid. */
  uid?: number;
  gid?: number;
  tool?: UserNetTool;
  /**
   * Our end of the pipe bwrap keeps open as `--sync-fd`: the helper then ends when the sandbox
   * ends (and so when the server dies, through bwrap's --die-with-parent). Taken over: it is closed
   * here once the helper holds it. Without it the helper ends when this process ends or on close().
   */
  sync?: Readable;
  /** Timers of the readiness wait and the close grace (default: the system clock). */
  clock?: Clock;
  /** Addresses made unreachable inside; default: the host's own non-loopback IPv4 addresses. */
  deny?: string[];
  /** Limit for the helper to bring the interface up (default 10 s). */
  timeoutMs?: number;
  signal?: AbortSignal;
}

/** Addresses both tools use inside the sandbox. */
const SLIRP = { address: '10.0.2.100', gateway: '10.0.2.2', dns: '10.0.2.3' } as const;
/** pasta forwards DNS sent to this link-local address to the host's resolver (podman uses it too). */
const PASTA_DNS = '169.254.1.1';
const MTU = 65520;
/** Grace between SIGTERM and SIGKILL on close(). */
const GRACE_MS = 500;
/** Directories searched for the helpers besides PATH (a non-root server's PATH may lack sbin). */
const BIN_DIRS = ['/usr/local/sbin', '/usr/local/bin', '/usr/sbin', '/usr/bin', '/sbin', '/bin'];

/**
 * The shim, run as the sandbox user. bwrap (unprivileged) nests two user namespaces: the network
 * namespace belongs to the outer one, which no process stays in, so /proc/<pid>/ns/user (the inner
 * one) cannot be used to enter the network namespace. NS_GET_USERNS on the network namespace gives
 * the owner; the shim keeps that fd and the netns fd open across exec as /proc/self/fd/N, adds the
 * `unreachable` routes (nsenter + ip, as uid 0 of that namespace), then execs the helper. It first
 * waits for the namespace's id maps: bwrap reports child-pid before its child writes them, and a
 * process entering an unmapped user namespace loses its capabilities at exec. With
 * `watch` (pasta, which has no exit fd) it stays as the helper's parent and kills it when fd 3 closes.
 * argv: pid, comma-separated deny list, watch (0/1), then the helper's argv with @USERNS@ / @NETNS@.
 */
const SHIM = String.raw`
use strict; use Fcntl; use POSIX ();
my ($pid, $deny, $watch, @cmd) = @ARGV;
for (my $i = 0; ; $i++) {
  open(my $m, '<', "/proc/$pid/gid_map") or die "raas-net: open /proc/$pid/gid_map: $!\n";
  my $map = do { local $/; <$m> };
  last if defined $map && $map =~ /\d/;
  die "raas-net: the sandbox's user namespace got no id map within 10 s\n" if $i >= 10000;
  select(undef, undef, undef, 0.001);
}
$^F = 1023;
open(my $net, '<', "/proc/$pid/ns/net") or die "raas-net: open /proc/$pid/ns/net: $!\n";
my $r = ioctl($net, 0xb701, 0);
defined $r or die "raas-net: NS_GET_USERNS on the sandbox's network namespace: $!\n";
my $u = int($r);
open(my $ufh, '<&=', $u) or die "raas-net: fdopen: $!\n";
fcntl($ufh, F_SETFD, 0) or die "raas-net: fcntl: $!\n";
my ($U, $N) = ("/proc/self/fd/$u", '/proc/self/fd/' . fileno($net));
if ($deny ne '') {
  open(my $ip, '|-', 'nsenter', '--preserve-credentials', "--user=$U", "--net=$N", 'ip', '-batch', '-') // die "raas-net: fork: $!\n";
  print $ip "route replace unreachable $_\n" for split /,/, $deny;
  close($ip) or die "raas-net: adding unreachable routes failed (ip status $?)\n";
}
s/\@USERNS\@/$U/g, s/\@NETNS\@/$N/g for @cmd;
if (!$watch) { exec { $cmd[0] } @cmd or die "raas-net: exec $cmd[0]: $!\n"; }
pipe(my $pr, my $pw) or die "raas-net: pipe: $!\n";
my $R = '/proc/self/fd/' . fileno($pw);
s/\@READY\@/$R/g for @cmd;
my $kid = fork() // die "raas-net: fork: $!\n";
if (!$kid) { close(STDIN); close($pr); exec { $cmd[0] } @cmd or die "raas-net: exec $cmd[0]: $!\n"; }
close($net); close($ufh); close($pw);
open(my $ready, '>&=', 4) or die "raas-net: fd 4: $!\n";
my $prf = fileno($pr);
$SIG{TERM} = sub { kill 'KILL', $kid };
$SIG{CHLD} = sub {};
open(my $ex, '<&=', 3) or die "raas-net: fd 3: $!\n";
for (;;) {
  if (waitpid($kid, POSIX::WNOHANG()) == $kid) { exit(($? >> 8) || 1); }
  my $rin = ''; vec($rin, 3, 1) = 1; vec($rin, $prf, 1) = 1 if $pr;
  if (select(my $rout = $rin, undef, undef, 1) > 0) {
    if ($pr && vec($rout, $prf, 1)) { my $b; if (sysread($pr, $b, 64)) { syswrite($ready, '1'); } close($pr); undef $pr; }
    if (vec($rout, 3, 1)) { my $b; last unless sysread($ex, $b, 64); }
  }
}
kill 'KILL', $kid; waitpid($kid, 0); exit 0;
`;

/** Absolute path of an executable, from PATH and the usual sbin/bin directories. */
function which(name: string): string | undefined {
  return findBinary(name) ?? BIN_DIRS.map((d) => path.join(d, name)).find((p) => findBinary(p));
}

/** The helper binaries, resolved once per process. */
interface Binaries {
  perl: string;
  nsenter: string;
  ip: string;
  helper: string;
}
const resolved = new Map<UserNetTool, Binaries>();

/**
 * Checks what network sandboxes need (run it when the runtime prepares): the helper, perl, nsenter
 * and ip on the host, and /dev/net/tun usable by the sandbox user. Throws RaasError naming the fix.
 */
export function checkUserNet(tool: UserNetTool = 'slirp4netns', ids: { uid?: number; gid?: number } = {}): void {
  binaries(tool);
  checkTun(ids.uid ?? process.getuid?.() ?? 0, ids.gid ?? process.getgid?.() ?? 0);
}

function binaries(tool: UserNetTool): Binaries {
  const cached = resolved.get(tool);
  if (cached) return cached;
  const pkg: Record<string, string> = {
    perl: 'perl-base',
    nsenter: 'util-linux',
    ip: 'iproute2',
    slirp4netns: 'slirp4netns',
    pasta: 'passt',
  };
  const found: Record<string, string> = {};
  for (const name of ['perl', 'nsenter', 'ip', tool]) {
    const p = which(name);
    if (!p) {
      throw new RaasError(
        'sandbox_unavailable',
        `sandboxes with network: true need "${name}" on the host, which is missing: run scripts/setup.sh or "apt-get install ${pkg[name]}", ` +
          'or give the handler network: false',
        { retryable: false },
      );
    }
    found[name] = p;
  }
  const b = { perl: found.perl, nsenter: found.nsenter, ip: found.ip, helper: found[tool] };
  resolved.set(tool, b);
  return b;
}

/** The helper opens /dev/net/tun as the sandbox user: it must be readable and writable by that user. */
function checkTun(uid: number, gid: number): void {
  const dev = '/dev/net/tun';
  let st: fs.Stats;
  try {
    st = fs.statSync(dev);
  } catch {
    throw new RaasError(
      'sandbox_unavailable',
      `${dev} is missing, which sandboxes with network: true need: load the tun module ("modprobe tun"), or give the handler network: false`,
      {
        retryable: false,
      },
    );
  }
  const m = st.mode;
  const ok = uid === 0 || (m & 0o006) === 0o006 || (st.gid === gid && (m & 0o060) === 0o060) || (st.uid === uid && (m & 0o600) === 0o600);
  if (!ok) {
    throw new RaasError(
      'sandbox_unavailable',
      `the sandbox user (uid ${uid}) cannot open ${dev} (mode ${(m & 0o777).toString(8)}, owner ${st.uid}:${st.gid}), which sandboxes with network: true need: ` +
        `run scripts/setup.sh, or "chgrp ${gid} ${dev} && chmod 0660 ${dev}" (or 0666, the udev default), or give the handler network: false`,
      { retryable: false },
    );
  }
}

/** The host's own non-loopback IPv4 addresses: a sandbox must not reach host services through them. */
export function hostAddresses(): string[] {
  const out = new Set<string>();
  for (const list of Object.values(os.networkInterfaces())) {
    for (const a of list ?? []) if (a.family === 'IPv4' && !a.internal && !a.address.startsWith('127.')) out.add(a.address);
  }
  return [...out];
}

/** The resolver a network sandbox uses (the helper's DNS forwarder). */
function sandboxResolver(tool: UserNetTool = 'slirp4netns'): string {
  return tool === 'pasta' ? PASTA_DNS : SLIRP.dns;
}

/**
 * bwrap arguments for a network sandbox, after `--ro-bind /etc /etc`: a generated resolv.conf (the
 * helper's DNS forwarder; the host's may name a loopback resolver the sandbox cannot reach) bound
 * over /etc/resolv.conf, or over its target when the host's is a symlink (an image-rooted sandbox
 * names the target in its image). Writes `dir/resolv.conf`
 * (`dir` must be readable by the sandbox user; one file serves every sandbox of a tool).
 */
export function networkBwrapArgs(dir: string, tool: UserNetTool = 'slirp4netns', target: string = resolvConfTarget()): string[] {
  const file = path.join(dir, tool === 'pasta' ? 'resolv-pasta.conf' : 'resolv.conf');
  const text = `# written by raas: the sandbox's network helper forwards DNS to the host's resolver\nnameserver ${sandboxResolver(tool)}\noptions edns0\n`;
  let current: string | undefined;
  try {
    current = fs.readFileSync(file, 'utf8');
  } catch {
    /* first use */
  }
  if (current !== text) {
    const tmp = `${file}.${process.pid}.tmp`;
    fs.writeFileSync(tmp, text, { mode: 0o644 });
    fs.renameSync(tmp, file);
  }
  return ['--ro-bind', file, target];
}

/** Where /etc/resolv.conf resolves inside the sandbox (/etc is the host's, bound read-only). */
function resolvConfTarget(): string {
  let p = '/etc/resolv.conf';
  for (let i = 0; i < 8; i++) {
    let link: string;
    try {
      link = fs.readlinkSync(p);
    } catch {
      return p;
    }
    p = path.resolve(path.dirname(p), link);
  }
  return p;
}

/** The helper's command line (after the shim); @USERNS@ and @NETNS@ are the shim's fds. */
function helperArgv(tool: UserNetTool, b: Binaries): string[] {
  if (tool === 'pasta') {
    return [
      b.helper,
      '-f',
      '-q',
      '-e',
      '--config-net',
      '-4',
      '--no-map-gw',
      '--no-dhcp',
      // No port forwarding either way: 'auto' (the default) would forward the host's loopback ports into
      // the sandbox (-T/-U) and let the sandbox open ports on the host (-t/-u).
      '-t',
      'none',
      '-u',
      'none',
      '-T',
      'none',
      '-U',
      'none',
      '--dns-forward',
      PASTA_DNS,
      '--mtu',
      String(MTU),
      '--userns',
      '@USERNS@',
      '--netns',
      '@NETNS@',
      // pasta writes its pid file once it has configured the namespace (addresses, routes, MTU): the
      // file is a pipe of the shim, which passes the news on to our fd 4, as slirp4netns's --ready-fd.
      '--pid',
      '@READY@',
    ];
  }
  // nsenter enters the owning user namespace (where we are uid 0) so slirp4netns keeps its capabilities
  // across exec: it then joins the network namespace, and --enable-sandbox (own mount namespace, all
  // capabilities dropped but CAP_NET_BIND_SERVICE) works; slirp4netns 1.2.0 skips the user namespace
  // for --enable-sandbox with --netns-type=path.
  return [
    b.nsenter,
    '--preserve-credentials',
    '--user=@USERNS@',
    b.helper,
    '--configure',
    `--mtu=${MTU}`,
    '--disable-host-loopback',
    '--enable-sandbox',
    '--enable-seccomp',
    '--exit-fd=3',
    '--ready-fd=4',
    '--netns-type=path',
    '@NETNS@',
    'tap0',
  ];
}

/**
 * Starts the helper for the sandbox whose pid 1 is `pid` and waits until the sandbox's interface is
 * up. Rejects with RaasError('sandbox_error') when the helper fails (its stderr in the message).
 */
export async function startUserNet(o: UserNetOptions): Promise<UserNet> {
  o.signal?.throwIfAborted();
  const tool = o.tool ?? 'slirp4netns';
  const b = binaries(tool);
  const deny = o.deny ?? hostAddresses();
  for (const d of deny) {
    const [addr, bits, ...rest] = d.split('/');
    if (!net.isIP(addr) || rest.length || (bits !== undefined && !/^\d{1,3}$/.test(bits))) {
      throw new RaasError('config_invalid', `network deny entry "${d}" is not an IP address or CIDR (e.g. 192.0.2.2 or 10.0.0.0/8)`, {
        retryable: false,
      });
    }
  }
  const argv = [b.perl, '-e', SHIM, String(o.pid), deny.join(','), tool === 'pasta' ? '1' : '0', ...helperArgv(tool, b)];
  // fd 3: the exit fd (sync from bwrap, or a pipe we hold); fd 4: slirp4netns writes '1' when up.
  const child = spawn(argv[0], argv.slice(1), {
    uid: o.uid,
    gid: o.gid,
    env: { PATH: [...BIN_DIRS].join(':'), LANG: 'C' },
    detached: true,
    stdio: ['ignore', 'ignore', 'pipe', (o.sync as Stream | undefined) ?? 'pipe', 'pipe'],
  });
  // The helper holds its own copy of the sync fd now; ours would keep it open past the sandbox.
  o.sync?.destroy();
  const helper = new HelperProcess(child, tool, deny, o.clock ?? systemClock);
  try {
    await helper.ready(o.pid, o.timeoutMs ?? 10_000, o.signal);
    return helper;
  } catch (e) {
    await helper.close();
    throw e;
  }
}

class HelperProcess implements UserNet {
  readonly exited: Promise<void>;
  private done = false;
  private code: number | null = null;
  private stderr = '';
  private closing: Promise<void> | undefined;

  constructor(
    private readonly child: ChildProcess,
    private readonly tool: UserNetTool,
    private readonly denied: string[],
    private readonly clock: Clock,
  ) {
    this.exited = new Promise((r) => {
      const end = (code: number | null): void => {
        this.done = true;
        this.code ??= code;
        r();
      };
      child.once('close', end);
      // A failed spawn emits 'error' and may never emit 'close'.
      child.once('error', (e) => {
        this.stderr += `spawn: ${e.message}\n`;
        end(null);
      });
    });
    child.stderr!.setEncoding('utf8');
    child.stderr!.on('data', (d: string) => (this.stderr = (this.stderr + d).slice(-4000)));
    // Our ends of fds 3 and 4 must not keep the event loop alive; errors there mean the helper is gone.
    for (const s of [child.stdio[3], child.stdio[4]] as (Readable | null)[]) {
      s?.on('error', () => undefined);
    }
    (child.stdio[3] as Socket | null)?.unref?.();
    child.unref();
  }

  describe(): UserNetInfo {
    const pasta = this.tool === 'pasta';
    const host = hostRoute();
    return {
      tool: this.tool,
      pid: this.child.pid,
      address: pasta ? (host.address ?? '') : SLIRP.address,
      gateway: pasta ? (host.gateway ?? '') : SLIRP.gateway,
      dns: sandboxResolver(this.tool),
      mtu: MTU,
      denied: [...this.denied],
    };
  }

  /** The ready fd (slirp4netns's --ready-fd, pasta's pid file), then for pasta the default route in the sandbox's namespace. */
  async ready(sandboxPid: number, timeoutMs: number, signal?: AbortSignal): Promise<void> {
    const fail = (why: string): RaasError =>
      new RaasError(
        'sandbox_error',
        `the sandbox's network helper (${this.tool}) ${why}; stderr: ${this.stderr.trim().slice(-1500) || '(empty)'}`,
      );
    const deadline = this.clock.now() + timeoutMs;
    if (this.done) throw fail(`exited during start (code ${this.code})`);
    {
      // slirp4netns writes '1' to its ready fd, pasta its pid (its pid file is fd 4) once configured.
      const readyFd = this.child.stdio[4] as Readable;
      await new Promise<void>((resolve, reject) => {
        const timer = this.clock.setTimeout(() => finish(fail(`did not bring the interface up within ${timeoutMs} ms`)), timeoutMs);
        const onData = (): void => finish();
        const onAbort = (): void => finish(signal!.reason);
        let settled = false;
        const finish = (err?: unknown): void => {
          if (settled) return;
          settled = true;
          this.clock.clearTimeout(timer);
          readyFd.off('data', onData);
          signal?.removeEventListener('abort', onAbort);
          if (err) reject(err);
          else resolve();
        };
        readyFd.once('data', onData);
        signal?.addEventListener('abort', onAbort, { once: true });
        void this.exited.then(() => finish(fail(`exited during start (code ${this.code})`)));
      });
      readyFd.destroy();
      if (this.tool === 'slirp4netns') return;
    }
    for (;;) {
      signal?.throwIfAborted();
      if (this.done) throw fail(`exited during start (code ${this.code})`);
      if (hasDefaultRoute(sandboxPid)) return;
      if (this.clock.now() > deadline) throw fail(`did not bring the interface up within ${timeoutMs} ms`);
      await sleep(5, undefined, this.clock);
    }
  }

  close(): Promise<void> {
    this.closing ??= (async () => {
      const pid = this.child.pid;
      if (pid !== undefined && !this.done) {
        kill(-pid, 'SIGTERM');
        await Promise.race([this.exited, sleep(GRACE_MS, undefined, this.clock)]);
        if (!this.done) {
          kill(-pid, 'SIGKILL');
          await this.exited;
        }
      }
      (this.child.stdio[3] as Readable | null)?.destroy();
      (this.child.stdio[4] as Readable | null)?.destroy();
    })();
    return this.closing;
  }
}

function kill(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(pid, sig);
  } catch {
    /* gone */
  }
}

/** True once the namespace of `pid` has a default IPv4 route (read from the host's /proc). */
function hasDefaultRoute(pid: number): boolean {
  try {
    return fs
      .readFileSync(`/proc/${pid}/net/route`, 'utf8')
      .split('\n')
      .slice(1)
      .some((l) => l.split('\t')[1] === '00000000');
  } catch {
    return false;
  }
}

/** The host's default-route interface address and gateway (what pasta copies into the sandbox). */
function hostRoute(): { address?: string; gateway?: string } {
  try {
    const line = fs
      .readFileSync('/proc/net/route', 'utf8')
      .split('\n')
      .slice(1)
      .map((l) => l.split('\t'))
      .find((f) => f[1] === '00000000');
    if (!line) return {};
    const hex = line[2];
    const gateway = [3, 2, 1, 0].map((i) => parseInt(hex.slice(i * 2, i * 2 + 2), 16)).join('.');
    const address = os.networkInterfaces()[line[0]]?.find((a) => a.family === 'IPv4')?.address;
    return { address, gateway };
  } catch {
    return {};
  }
}
