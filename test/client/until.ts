/** Waits on real I/O (setImmediate, which the fake timers of these tests leave alone) until `cond` holds. */
export async function until(cond: () => boolean, what = 'condition', maxTurns = 20_000): Promise<void> {
  for (let i = 0; i < maxTurns; i++) {
    if (cond()) return;
    await new Promise<void>((r) => setImmediate(r));
  }
  throw new Error(`timed out waiting for ${what}`);
}

/** Lets pending I/O run for a few event-loop turns. */
export async function settleIo(turns = 200): Promise<void> {
  for (let i = 0; i < turns; i++) await new Promise<void>((r) => setImmediate(r));
}
