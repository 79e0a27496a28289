// A lock file per cache key, shared by every server on the machine: created with O_EXCL and
// holding the holder's pid; a lock whose pid is dead is stale and taken over. The lock only saves
// duplicate work: entries appear by rename(), which fails when another process won the race.
import fs from 'node:fs';
import { sleep, systemClock, type Clock } from '../../../util/clock.js';

const POLL_MS = 200;
// A lock file with no pid yet (its creator is between open and write) is trusted this long.
const EMPTY_GRACE_MS = 10_000;

/** True while a process with this pid exists (EPERM: it exists, as another user). */
export function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** True when the lock at `file` is held by a live process (or was created a moment ago). */
function held(file: string): boolean {
  let text: string;
  let st: fs.Stats;
  try {
    st = fs.statSync(file);
    text = fs.readFileSync(file, 'utf8');
  } catch {
    return false;
  }
  const pid = Number.parseInt(text, 10);
  if (Number.isInteger(pid) && pid > 0) return pidAlive(pid);
  // Compared with a file's mtime, so wall time (an injected monotonic clock has another origin).
  return Date.now() - st.mtimeMs < EMPTY_GRACE_MS;
}

/** Takes the lock once if it is free or stale; true when we hold it now. */
export function tryLock(file: string): boolean {
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      fs.writeFileSync(file, `${process.pid}\n`, { flag: 'wx', mode: 0o644 });
      return true;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
    }
    if (held(file)) return false;
    // Stale: remove it, unless another process replaced it since we looked (same inode check).
    const before = fs.statSync(file, { throwIfNoEntry: false });
    if (before && !held(file) && fs.statSync(file, { throwIfNoEntry: false })?.ino === before.ino) fs.rmSync(file, { force: true });
  }
  return false;
}

/** Waits for the lock (polling), then returns its release function. Rejects with the signal's reason on abort. */
export async function acquireLock(file: string, signal?: AbortSignal, clock: Clock = systemClock): Promise<() => void> {
  for (;;) {
    signal?.throwIfAborted();
    if (tryLock(file)) {
      return () => {
        try {
          // Only our own lock: a file with another pid was never ours to remove.
          if (fs.readFileSync(file, 'utf8').trim() === String(process.pid)) fs.rmSync(file, { force: true });
        } catch {
          /* already gone */
        }
      };
    }
    await sleep(POLL_MS, signal, clock);
  }
}
