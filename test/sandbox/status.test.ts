// /status says which isolation and limits are in force (issue: "say which one is in force in /status").
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRolloutServer, type RolloutServer } from '../../src/server/index.js';
import { testRoot } from './helpers.js';

const isRoot = process.getuid?.() === 0;

describe('/status reports the sandbox isolation and limits in force', () => {
  let server: RolloutServer;
  beforeAll(async () => {
    server = await startRolloutServer({
      port: 0,
      log_level: 'silent',
      sandbox: { root: testRoot('status'), disk_mb: 512, limits: { cpus: 0.5 } },
    });
  });
  afterAll(async () => server?.close());

  it('names the runtime, the workspace size, the seccomp list, the network mode and the cgroup mode (or why rlimits)', async () => {
    const body = (await (await fetch(`${server.url}/status`)).json()) as { sandbox: Record<string, any> };
    const sb = body.sandbox;
    expect(sb.runtime).toBe('bwrap');
    expect(sb.workspace).toEqual({ kind: 'tmpfs private to the sandbox', size_mb: 512 });
    expect(sb.max_read_bytes).toBe(16 << 20);
    expect(sb.seccomp.filter).toBe('on');
    expect(sb.seccomp.denied_syscalls).toEqual(
      expect.arrayContaining(['ptrace', 'process_vm_readv', 'pidfd_getfd', 'mount', 'unshare', 'bpf', 'userfaultfd', 'keyctl']),
    );
    expect(sb.nested_user_namespaces).toMatch(/disabled/);
    expect(sb.network.network_true).toMatch(/slirp4netns/);
    expect(sb.limits.cpus).toBe(0.5);
    const cg = sb.limits.cgroup as { mode: string; reason?: string };
    expect(['cgroup-v1', 'cgroup-v2', 'rlimit']).toContain(cg.mode);
    if (cg.mode === 'rlimit') expect(cg.reason).toBeTruthy();
    // As root on this machine kind (cgroup v1, writable), cgroups are in force.
    if (isRoot) expect(cg.mode).toMatch(/^cgroup-v[12]$/);
  });

  it('a server without sandbox settings says null rather than guessing', async () => {
    const bare = await startRolloutServer({ port: 0, log_level: 'silent' });
    try {
      const body = (await (await fetch(`${bare.url}/status`)).json()) as { sandbox: unknown };
      expect(body.sandbox).toBeNull();
    } finally {
      await bare.close();
    }
  });
});
