import fs from 'node:fs';
import path from 'node:path';
import { RaasError } from '../../protocol/errors.js';
import { alive as pidAlive } from './proc.js';

interface Lease {
  pid: number;
  expires: number;
}

interface LeaseFile {
  cursor: number;
  leases: Record<string, Lease>;
}

/** 127.x.y.z with x in 1..255, y in 0..255, z in 1..254: never 127.0.0.x, which the host itself uses. */
const SPACE = 255 * 256 * 254;

/** The i-th address of the lease space. */
export function loopbackAddress(i: number): string {
  const z = 1 + (i % 254);
  const y = Math.floor(i / 254) % 256;
  const x = 1 + Math.floor(i / (254 * 256));
  return `127.${x}.${y}.${z}`;
}

const LOCK_STALE_MS = 10_000;
const LOCK_WAIT_MS = 5_000;

/**
 * Loopback lease allocator: a unique 127.x.y.z per sandbox for runtimes that share the host network,
 * safe across processes on one node. The lease table is a JSON file guarded by an O_EXCL lock file;
 * a lease ends on release, when its owner process is gone, or when it expires.
 */
export class LoopbackLeases {
  private readonly lock: string;

  constructor(
    private readonly file: string,
    private readonly ttlMs: number,
    private readonly now: () => number = Date.now,
  ) {
    this.lock = `${file}.lock`;
  }

  /** Leases a free address to `pid` (default this process). */
  acquire(pid = process.pid): string {
    return this.locked((t) => {
      this.reclaim(t);
      for (let k = 0; k < SPACE; k++) {
        const i = (t.cursor + k) % SPACE;
        const addr = loopbackAddress(i);
        if (t.leases[addr]) continue;
        t.leases[addr] = { pid, expires: this.now() + this.ttlMs };
        t.cursor = (i + 1) % SPACE;
        return addr;
      }
      throw new RaasError('sandbox_unavailable', 'every loopback address is leased', { retryable: true });
    });
  }

  /** Ends a lease. Safe for an address that is not leased. */
  release(addr: string): void {
    this.locked((t) => {
      delete t.leases[addr];
    });
  }

  /** Current leases (after reclaiming dead and expired ones). */
  list(): Record<string, Lease> {
    return this.locked((t) => {
      this.reclaim(t);
      return { ...t.leases };
    });
  }

  private reclaim(t: LeaseFile): void {
    const now = this.now();
    for (const [addr, l] of Object.entries(t.leases)) if (l.expires <= now || !pidAlive(l.pid)) delete t.leases[addr];
  }

  private locked<T>(fn: (t: LeaseFile) => T): T {
    fs.mkdirSync(path.dirname(this.file), { recursive: true });
    this.takeLock();
    try {
      let t: LeaseFile = { cursor: 0, leases: {} };
      try {
        t = JSON.parse(fs.readFileSync(this.file, 'utf8')) as LeaseFile;
      } catch {
        /* first use, or a torn file from a crash: start empty */
      }
      const out = fn(t);
      const tmp = `${this.file}.${process.pid}.tmp`;
      fs.writeFileSync(tmp, JSON.stringify(t));
      fs.renameSync(tmp, this.file);
      return out;
    } finally {
      fs.rmSync(this.lock, { force: true });
    }
  }

  private takeLock(): void {
    const deadline = Date.now() + LOCK_WAIT_MS;
    const nap = new Int32Array(new SharedArrayBuffer(4));
    for (;;) {
      try {
        fs.writeFileSync(this.lock, String(process.pid), { flag: 'wx' });
        return;
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
      }
      // A lock whose holder died, or that is older than any critical section could be, is stale.
      try {
        const holder = Number(fs.readFileSync(this.lock, 'utf8'));
        const age = Date.now() - fs.statSync(this.lock).mtimeMs;
        if (age > LOCK_STALE_MS || (holder > 0 && !pidAlive(holder))) fs.rmSync(this.lock, { force: true });
      } catch {
        /* released meanwhile */
      }
      if (Date.now() > deadline)
        throw new RaasError('sandbox_error', `lease lock ${this.lock} held too long; remove it if no raas process runs`);
      Atomics.wait(nap, 0, 0, 2);
    }
  }
}
