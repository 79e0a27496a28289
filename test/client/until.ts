/**
 * Waits on real I/O until `cond` holds, polling with setImmediate and reading Date.now(), which the
 * fake timers of these tests leave alone (they fake only setTimeout/clearTimeout).
 */
export async function until(cond: () => boolean, what = 'condition', maxMs = 5000): Promise<void> {
  const deadline = Date.now() + maxMs;
  while (Date.now() < deadline) {
    if (cond()) return;
    await new Promise<void>((r) => setImmediate(r));
  }
  if (!cond()) throw new Error(`timed out waiting for ${what}`);
}

/** Lets pending I/O run for a few event-loop turns. */
export async function settleIo(turns = 200): Promise<void> {
  for (let i = 0; i < turns; i++) await new Promise<void>((r) => setImmediate(r));
}
