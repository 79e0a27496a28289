import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';

/**
 * The sandboxes' last line of defence when the server dies by SIGKILL (or the OOM killer).
 *
 * bwrap's --die-with-parent ends the sandboxes of a dead server, with one hole in bubblewrap
 * 0.8.0 and later (bubblewrap.c@124c4cd: the outer process writes the child's go-ahead to an
 * eventfd after clone, and sets its own death signal only then): a server killed while a sandbox
 * starts leaves the sandbox's pid 1 blocked on that eventfd for ever, reparented to init, where
 * no death signal reaches it.
 *
 * Every sandbox launch carries an environment mark (`RAAS_SANDBOX_OWNER=<random>`; bwrap clears
 * its command's environment, so the sandbox never sees it, while the stuck child, a fork of bwrap
 * without exec, still shows it in /proc/<pid>/environ). A small shell holds a pipe from the server:
 * when the pipe ends (the server exited, however), it kills every process still carrying the mark,
 * twice, 300 ms apart (a launch forked but not yet exec'd gets its mark on exec). It runs while
 * someone holds it (each sandbox, and a runtime from its first start to its close): the last
 * release ends it (a sweep that finds nothing), the next launch starts another with a new mark.
 */
const SWEEP = [
  'sweep() { for f in $(grep -lzxF "RAAS_SANDBOX_OWNER=$1" /proc/[0-9]*/environ 2>/dev/null); do',
  '  p=${f#/proc/}; kill -KILL "${p%/environ}" 2>/dev/null; done; }',
  'while read -r _; do :; done',
  'sweep "$1"; sleep 0.3; sweep "$1"',
].join('\n');

const OWNER_ENV = 'RAAS_SANDBOX_OWNER';

let current: { child: ChildProcess | undefined; mark: string; users: number } | undefined;

/**
 * Joins the current sentinel (starting one if none runs) and returns the mark for the launch's
 * environment. With `deferStart`, a sentinel not yet running is started by `start()`, which the
 * caller calls before the launch can fork (bwrap reading its options from a pipe: before they are
 * written), so the sentinel's spawn overlaps the launch's own start instead of preceding it.
 */
export function acquireSentinel(opts: { deferStart?: boolean } = {}): {
  env: Record<string, string>;
  start: () => void;
  release: () => void;
} {
  current ??= { child: undefined, mark: randomBytes(12).toString('hex'), users: 0 };
  const s = current;
  s.users++;
  let released = false;
  const start = (): void => {
    if (s.child || released) return;
    const child = spawn('/bin/sh', ['-c', SWEEP, 'raas-sentinel', s.mark], { stdio: ['pipe', 'ignore', 'ignore'], detached: true });
    child.on('error', () => undefined);
    child.stdin!.on('error', () => undefined);
    child.unref();
    (child.stdin as unknown as { unref?: () => void }).unref?.();
    s.child = child;
  };
  if (!opts.deferStart) start();
  return {
    env: { [OWNER_ENV]: s.mark },
    start,
    release: () => {
      if (released) return;
      released = true;
      if (--s.users > 0) return;
      if (current === s) current = undefined;
      s.child?.stdin?.end();
    },
  };
}
