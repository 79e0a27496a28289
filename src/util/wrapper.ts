/**
 * `npm run raas -- serve` and `npx raas serve` start raas as `npm → sh -c "raas serve" → node`. npm
 * forwards SIGTERM and SIGINT to its direct child only (@npmcli/run-script's signal-manager), the
 * shell, which dies without passing them on, so `kill <npm pid>` would leave raas running, orphaned
 * on its port. Under such a wrapper raas therefore watches its parent: when the parent is gone (the
 * process was re-parented), raas stops as on SIGTERM. Outside npm (a shell's `raas serve &`, nohup,
 * Slurm) nothing is watched: a server may outlive the shell that started it.
 */
export function followNpmWrapper(env: NodeJS.ProcessEnv = process.env, intervalMs = 500): () => void {
  // npm run sets npm_lifecycle_event, npx npm_lifecycle_script; both (and yarn, pnpm) set npm_config_user_agent.
  if (env.npm_config_user_agent === undefined && env.npm_lifecycle_script === undefined) return () => {};
  const parent = process.ppid;
  const timer = setInterval(() => {
    // Re-parented to init before this ran: the wrapper was stopped while raas was starting.
    if (process.ppid === parent && parent !== 1) return;
    clearInterval(timer);
    process.stderr.write(`raas: the npm/npx process that started raas is gone; stopping as on SIGTERM\n`);
    process.kill(process.pid, 'SIGTERM');
  }, intervalMs);
  // Never what keeps raas alive: a command that is done exits whatever the watch.
  timer.unref();
  return () => clearInterval(timer);
}
