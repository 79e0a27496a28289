// Sandboxes rooted in an image instead of the host's userland, for real: a busybox-static image (no
// libc, no node, no python, no bash) in its four forms and a Debian image with python3 and pytest
// (test/helpers/images.ts). The tool server runs in both; the tools use the image's shell and
// interpreter; writes go to a private overlay that leaves the image untouched; and the defences of
// host-rooted sandboxes hold: no capabilities, seccomp, no nested user namespaces, no network,
// cgroups, the sandbox user on the host.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSandboxRuntime, type ManagedSandbox, type Runtime } from '../../src/server/sandbox/index.js';
import { busyboxImage, debianImage, dockerArchiveOf, IMAGE_ENV, IMAGE_WORKDIR, ociOf, sifOf, WHITEOUT } from '../helpers/images.js';
import { hostServer, observed, testRoot, waitNamespaceEmpty } from './helpers.js';

const IS_ROOT = process.getuid?.() === 0;
const sandboxUid = IS_ROOT ? Number(spawnSync('id', ['-u', 'raas-sandbox'], { encoding: 'utf8' }).stdout.trim()) : process.getuid!();
const dir = testRoot('imgroot');
let rt: Runtime;
let bb: { dir: string; sif: string; oci: string; tar: string };
let debian: string;

/** A digest of a tree's paths, modes and contents (to show a sandbox left its image as it was). */
function treeDigest(root: string): string {
  const h = createHash('sha256');
  const walk = (p: string): void => {
    const st = fs.lstatSync(p);
    h.update(`${path.relative(root, p)} ${st.mode} ${st.size}\n`);
    if (st.isDirectory()) for (const e of fs.readdirSync(p).sort()) walk(path.join(p, e));
    else if (st.isFile()) h.update(fs.readFileSync(p));
  };
  walk(root);
  return h.digest('hex');
}

beforeAll(async () => {
  const b = await busyboxImage();
  bb = { dir: b, sif: await sifOf('busybox', b), oci: await ociOf('busybox', b), tar: await dockerArchiveOf('busybox', b) };
  debian = await debianImage();
  rt = createSandboxRuntime({ runtime: 'bwrap', root: dir, limits: { processes: 64, memory_mb: 1024, tmp_size_mb: 32 }, disk_mb: 64 });
}, 900_000);

afterAll(async () => {
  await rt?.close();
  fs.rmSync(dir, { recursive: true, force: true });
}, 300_000);

describe('an image with no libc, node, python or bash (busybox-static)', () => {
  it.each(['dir', 'sif', 'oci', 'tar'] as const)(
    'as %s: the tool server runs; exec uses the image; bash and python say what is missing',
    async (form) => {
      const sb = await rt.open({ rootImage: { ref: bb[form] } });
      try {
        const r = await sb.exec([
          'sh',
          '-c',
          'pwd; echo "$RAAS_IMAGE_MARK"; ls /bin/vi /etc/raas-layer-2 2>&1; ls /usr/bin/node /lib 2>&1; id -u',
        ]);
        observed(`busybox ${form}`, r.stdout);
        expect(r.exit_code).toBe(0);
        const lines = r.stdout.split('\n');
        // OCI and docker archives carry WorkingDir and Env; a SIF carries Env in /.singularity.d/env; a directory neither.
        expect(lines[0]).toBe(form === 'oci' || form === 'tar' ? IMAGE_WORKDIR : '/workspace');
        expect(lines[1]).toBe(form === 'dir' ? '' : IMAGE_ENV.RAAS_IMAGE_MARK);
        if (form === 'oci' || form === 'tar') expect(r.stdout).toMatch(new RegExp(`/bin/vi: No such file.*\\n/${WHITEOUT.added}`));
        else expect(r.stdout).toMatch(/^\/bin\/vi$/m);
        expect(r.stdout).toMatch(/\/usr\/bin\/node: No such file/);
        expect(lines.at(-2)).toBe('0');
        await expect(sb.bash('echo hi')).rejects.toThrow(/no \/bin\/bash \(its image has none\)/);
        await expect(sb.python('1')).rejects.toThrow(/no \/usr\/bin\/python3 \(its image has no python\)/);
        // The editor and file reads are the tool server's own: they need nothing of the image.
        await sb.edit({ command: 'create', path: `${sb.workspace}/notes.txt`, file_text: 'made by the editor\n' });
        expect((await sb.readFile('notes.txt')).toString()).toBe('made by the editor\n');
      } finally {
        await sb.close();
      }
    },
  );
});

describe('a Debian image with python3 and pytest inside', () => {
  let sb: ManagedSandbox;
  beforeAll(async () => {
    sb = (await rt.open({
      rootImage: { ref: debian, workdir: IMAGE_WORKDIR },
      files: { 'test_x.py': 'def test_x():\n    assert 1 + 1 == 2\n' },
    })) as ManagedSandbox;
  }, 120_000);
  afterAll(async () => sb?.close());

  it("bash, python and the tests run with the image's programs, not the host's", async () => {
    const b = await sb.bash(
      'cd /testbed && python3 -m pytest -q -p no:cacheprovider 2>&1 | tail -1; command -v python3; ls /usr/bin/node 2>&1',
    );
    observed('debian bash', b.output);
    expect(b.output).toMatch(/1 passed/);
    expect(b.output).toMatch(/No such file/);
    // The host has numpy (python3-numpy); the image does not.
    const py = await sb.python(
      'import sys\nprint(sys.executable)\ntry:\n    import numpy\n    print("numpy")\nexcept ImportError:\n    print("no numpy")',
    );
    expect(py.stdout).toBe('/usr/bin/python3\nno numpy\n');
    expect(spawnSync('/usr/bin/python3', ['-c', 'import numpy']).status).toBe(0);
  });

  it('the task is root of its own namespace with no capability, under seccomp and no_new_privs, as the sandbox user on the host', async () => {
    const st = (await sb.exec(['grep', '-E', '^(Uid|CapEff|CapBnd|NoNewPrivs|Seccomp):', '/proc/self/status'])).stdout;
    observed('image sandbox status', st);
    expect(st).toMatch(/Uid:\s+0\s/);
    expect(st).toMatch(/CapEff:\s+0{16}/);
    expect(st).toMatch(/CapBnd:\s+0{16}/);
    expect(st).toMatch(/NoNewPrivs:\s+1/);
    expect(st).toMatch(/Seccomp:\s+2/);
    // On the host every process of the sandbox runs as the sandbox user.
    const pids = spawnSync('pgrep', ['-s', '0', '-g', String(sb.pid)], { encoding: 'utf8' });
    expect(pids.status === 0 || pids.status === 1).toBe(true);
    for (const line of fs
      .readFileSync(`/proc/${sb.pid}/status`, 'utf8')
      .split('\n')
      .filter((l) => l.startsWith('Uid:'))) {
      expect(line.split(/\s+/).slice(1, 4)).toEqual([String(sandboxUid), String(sandboxUid), String(sandboxUid)]);
    }
    const us = await sb.exec(['sh', '-c', 'unshare -U true 2>&1; echo rc=$?; mount -t tmpfs x /mnt 2>&1; echo rc=$?']);
    observed('nested namespaces and mounts', us.stdout);
    expect(us.stdout).toMatch(/unshare.*(Operation not permitted|No space left).*\nrc=1/);
    expect(us.stdout).toMatch(/rc=(1|32)\n$/);
  });

  it('no network: only lo, the host loopback unreachable', async () => {
    const host = await hostServer();
    try {
      const r = await sb.python(
        `import socket\nprint(sorted(l.split(':')[0].strip() for l in open('/proc/net/dev').readlines()[2:]))\ns = socket.socket()\ns.settimeout(2)\ntry:\n    s.connect(("127.0.0.1", ${host.port})); print("CONNECTED")\nexcept OSError as e:\n    print("REFUSED")`,
      );
      expect(r.stdout).toBe("['lo']\nREFUSED\n");
    } finally {
      await host.close();
    }
  });

  it('a task that asks for network gets user-mode networking in its own namespace, with a resolver, never the host loopback', async () => {
    const host = await hostServer();
    const net = await rt.open({ rootImage: { ref: debian }, network: true });
    try {
      const r = await net.python(
        `import socket\nprint(sorted(l.split(':')[0].strip() for l in open('/proc/net/dev').readlines()[2:]))\nprint(open('/etc/resolv.conf').read().split()[-3])\ns = socket.socket()\ns.settimeout(2)\ntry:\n    s.connect(("127.0.0.1", ${host.port})); print("CONNECTED")\nexcept OSError:\n    print("REFUSED")`,
      );
      expect(r.stdout).toBe("['lo', 'tap0']\n10.0.2.3\nREFUSED\n");
    } finally {
      await net.close();
      await host.close();
    }
  });

  it("raas's files are read-only mounts the task can neither change, rename nor replace", async () => {
    const r = await sb.exec([
      'sh',
      '-c',
      'touch /.raas/x 2>&1; mv /.raas /moved 2>&1; rm -rf /.raas/tool-server 2>&1 | head -1; echo > /.raas/lib/ld.so 2>&1; ls /.raas',
    ]);
    observed('/.raas', r.stdout);
    expect(r.stdout).toMatch(/Read-only file system/);
    expect(r.stdout).toMatch(/Device or resource busy/);
    expect(r.stdout.trim().split('\n').at(-1)).toBe('tool-server');
    expect((await sb.exec(['true'])).exit_code).toBe(0);
  });

  it('writes, deletions and renames land in a private layer: the image and other sandboxes never see them', async () => {
    const img = await rt.roots.store().resolve(debian);
    const before = treeDigest(path.join(img.dir, 'etc'));
    const r = await sb.exec([
      'sh',
      '-c',
      'rm -rf /etc/apt && mkdir /etc/apt && mv /etc/dpkg /etc/dpkg2 && echo mine > /etc/hostname && ls /etc/apt | wc -l',
    ]);
    expect(r).toMatchObject({ exit_code: 0, stdout: '0\n' });
    const other = await rt.open({ rootImage: { ref: debian } });
    try {
      expect((await other.exec(['sh', '-c', 'ls /etc/apt | wc -l; ls -d /etc/dpkg; cat /etc/hostname'])).stdout).not.toMatch(/^0\n|mine/);
    } finally {
      await other.close();
    }
    expect(treeDigest(path.join(img.dir, 'etc'))).toBe(before);
  });

  it('the writable layer is bounded by sandbox.disk_mb', async () => {
    const r = await sb.exec(['sh', '-c', 'dd if=/dev/zero of=/big bs=1M count=100 2>&1; rm -f /big']);
    observed('disk_mb 64, 100 MB written', r.stdout);
    expect(r.stdout).toMatch(/No space left on device/);
  });

  it('a close leaves nothing running and no mount behind', async () => {
    const other = (await rt.open({ rootImage: { ref: debian } })) as ManagedSandbox;
    const ns = (await other.exec(['readlink', '/proc/self/ns/pid'])).stdout.trim();
    expect(ns).not.toBe(fs.readlinkSync('/proc/self/ns/pid'));
    await other.exec(['sh', '-c', 'sleep 300 & setsid sleep 300 & true']);
    await other.close();
    expect(await waitNamespaceEmpty(ns)).toEqual([]);
    expect(fs.readFileSync('/proc/self/mountinfo', 'utf8')).not.toContain(path.join(dir, 'ovl'));
  });
});

describe('SWE-bench-style conda environments', () => {
  it('an image with /opt/miniconda3/envs/testbed gets it active in every tool, as `conda activate testbed` leaves it', async () => {
    const img = path.join(dir, 'conda-image');
    spawnSync('cp', ['-a', bb.dir, img]);
    const bin = path.join(img, 'opt/miniconda3/envs/testbed/bin');
    fs.mkdirSync(bin, { recursive: true });
    fs.mkdirSync(path.join(img, 'opt/miniconda3/bin'), { recursive: true });
    fs.writeFileSync(path.join(bin, 'python'), '#!/bin/sh\necho "testbed python $*"\n', { mode: 0o755 });
    fs.writeFileSync(path.join(bin, 'pytest'), '#!/bin/sh\necho "testbed pytest"\n', { mode: 0o755 });
    const sb = await rt.open({ rootImage: { ref: img, workdir: '/testbed' } });
    try {
      const r = await sb.exec(['sh', '-c', 'echo $CONDA_PREFIX $CONDA_DEFAULT_ENV; echo $PATH; pytest']);
      expect(r.stdout).toBe(
        '/opt/miniconda3/envs/testbed testbed\n/opt/miniconda3/envs/testbed/bin:/opt/miniconda3/condabin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\ntestbed pytest\n',
      );
    } finally {
      await sb.close();
    }
  });
});

describe('fuse-overlayfs, for kernels without overlayfs in user namespaces', () => {
  it('works the same, and its daemon ends with the sandbox', async () => {
    const froot = testRoot('imgfuse');
    const frt = createSandboxRuntime({ runtime: 'bwrap', root: froot, image_roots: { overlay: 'fuse' } });
    try {
      const sb = (await frt.open({ rootImage: { ref: debian } })) as ManagedSandbox;
      const r = await sb.exec([
        'sh',
        '-c',
        'rm -rf /usr/share/doc && mkdir /usr/share/doc && echo ok > /usr/share/doc/x && grep " / " /proc/self/mountinfo',
      ]);
      expect(r.stdout).toMatch(/fuse/);
      const daemons = (): string => spawnSync('pgrep', ['-af', `fuse-overlayfs.*${froot}`], { encoding: 'utf8' }).stdout.trim();
      expect(daemons()).not.toBe('');
      await sb.close();
      for (let i = 0; i < 50 && daemons(); i++) await new Promise((r) => setTimeout(r, 100));
      expect(daemons()).toBe('');
    } finally {
      await frt.close();
      fs.rmSync(froot, { recursive: true, force: true });
    }
  });
});
