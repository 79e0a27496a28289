import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { INSIDE } from './bwrap.js';
import { findBinary } from './host.js';
import { DENIED_SYSCALLS, seccompArch, syscallNumber, type DeniedSyscall } from './seccomp.js';

export interface ApptainerArgsInput {
  binary: string;
  image: string;
  workspace: string;
  run: string;
  toolServer: string;
  network: boolean;
  fakeroot: boolean;
  env: Record<string, string>;
  extraArgs?: string[];
  /** Hardening flags (see ApptainerHardening); absent: the plain command line. */
  hardening?: ApptainerHardening;
  /**
   * Rooted in an instance's own image: no workspace bind (the workspace is `workdir` inside the
   * image, writable through --writable-tmpfs), the patched node's directory and the tool server
   * bound read-only under /.raas, the working directory `workdir`.
   */
  imageRoot?: { nodeDir: string; workdir: string };
  command: string[];
}

/** Where raas's own files appear in an image-rooted Apptainer sandbox (as in bwrap's, runtimes/bwrap-image.ts). */
export const APPTAINER_IMAGE_MOUNTS = { lib: '/.raas/lib', toolServer: '/.raas/tool-server' } as const;

/** What Apptainer can enforce beyond --containall (Apptainer 1.1 or later). */
interface ApptainerHardening {
  /** Docker-format seccomp profile (installApptainerSeccomp), passed as `--security seccomp:<file>`. */
  seccompProfile?: string;
  /** `--userns`: a new user namespace even where the setuid starter is installed. */
  userns?: boolean;
}

/**
 * The `apptainer exec` command line for one sandbox: --containall (own pid and ipc namespaces,
 * clean environment, no host home), --writable-tmpfs, a private network with only loopback unless
 * the task asks for network, the workspace and socket directory bound writable, the tool server
 * read-only, and --fakeroot when configured. With `hardening`: --no-privs (no capabilities, unless
 * --fakeroot asks for them), --no-mount hostfs (an admin's `mount hostfs = yes` would show every host
 * filesystem), --no-eval (env values and arguments are not shell-evaluated), the seccomp profile,
 * and --userns when asked.
 */
export function apptainerArgs(i: ApptainerArgsInput): string[] {
  const a = ['exec', '--containall', '--writable-tmpfs'];
  if (i.fakeroot) a.push('--fakeroot');
  if (!i.network) a.push('--net', '--network', 'none');
  if (i.imageRoot) {
    a.push('--bind', `${i.run}:${INSIDE.run}`);
    a.push('--bind', `${i.imageRoot.nodeDir}:${APPTAINER_IMAGE_MOUNTS.lib}:ro`);
    a.push('--bind', `${i.toolServer}:${APPTAINER_IMAGE_MOUNTS.toolServer}:ro`);
    a.push('--pwd', i.imageRoot.workdir);
  } else {
    a.push('--bind', `${i.workspace}:${INSIDE.workspace}`);
    a.push('--bind', `${i.run}:${INSIDE.run}`);
    a.push('--bind', `${i.toolServer}:${INSIDE.toolServer}:ro`);
    a.push('--pwd', INSIDE.workspace);
  }
  for (const [k, v] of Object.entries(i.env)) a.push('--env', `${k}=${v}`);
  const h = i.hardening;
  if (h) {
    if (!i.fakeroot) a.push('--no-privs');
    a.push('--no-mount', 'hostfs', '--no-eval');
    if (h.userns) a.push('--userns');
    if (h.seccompProfile) a.push('--security', `seccomp:${h.seccompProfile}`);
  }
  a.push(...(i.extraArgs ?? []));
  a.push(i.image, ...i.command);
  return a;
}

/** The apptainer (or singularity) binary on PATH, or the configured one. */
export function findApptainer(configured?: string): string | undefined {
  if (configured) return findBinary(configured);
  return findBinary('apptainer') ?? findBinary('singularity');
}

/** `apptainer build` command line for a .sif from a rendered definition file. */
export function apptainerBuildArgs(sif: string, definition: string, fakeroot: boolean): string[] {
  return ['build', ...(fakeroot ? ['--fakeroot'] : []), '--force', sif, definition];
}

/** Renders an apptainer definition template: `{{base}}` and `{{setup}}` are replaced. */
export function renderDefinition(template: string, vars: { base: string; setup: string }): string {
  return template.replaceAll('{{base}}', vars.base).replaceAll('{{setup}}', vars.setup);
}

/** Default definition template: a Debian base with node and python, then the image's setup script. */
export const DEFAULT_DEFINITION = `Bootstrap: docker
From: {{base}}

%post
    apt-get update && apt-get install -y --no-install-recommends nodejs python3 bash git ca-certificates
{{setup}}
`;

/** One rule of a Docker-format seccomp profile (the format Apptainer's `--security seccomp:` reads). */
interface ProfileRule {
  names: string[];
  action: 'SCMP_ACT_ERRNO';
  errnoRet: number;
  args?: Array<{ index: number; value: number; valueTwo: number; op: 'SCMP_CMP_MASKED_EQ' | 'SCMP_CMP_GT' }>;
  comment?: string;
}

const ERRNO_NUMBER = { EPERM: 1, ENOSYS: 38, EAFNOSUPPORT: 97 } as const;
/** Gaps of an allow-list up to this many values are denied value by value; larger ones are left open. */
const MAX_ENUMERATED_GAP = 16;

/**
 * The bwrap deny list (DENIED_SYSCALLS) as a Docker-format profile. Apptainer answers every denied
 * call with EPERM whatever `errnoRet` says (it passes a fixed errno to libseccomp), so clone3 is left
 * out: glibc falls back to clone() only on ENOSYS, and EPERM would break every new thread. Argument
 * checks become one rule per value (libseccomp allows one comparison per argument in a rule).
 */
export function apptainerSeccompProfile(arch: string = process.arch): object {
  const a = seccompArch(arch);
  const plain = new Map<number, string[]>();
  const rules: ProfileRule[] = [];
  for (const r of DENIED_SYSCALLS) {
    if (r.name === 'clone3' || syscallNumber(r.name, a) === undefined) continue;
    const errnoRet = ERRNO_NUMBER[r.errno];
    if (!r.when) {
      plain.set(errnoRet, [...(plain.get(errnoRet) ?? []), r.name]);
      continue;
    }
    for (const cmp of argComparisons(r)) rules.push({ names: [r.name], action: 'SCMP_ACT_ERRNO', errnoRet, args: [cmp] });
  }
  const grouped: ProfileRule[] = [...plain].map(([errnoRet, names]) => ({ names, action: 'SCMP_ACT_ERRNO', errnoRet }));
  return {
    defaultAction: 'SCMP_ACT_ALLOW',
    // Only the native architecture: libseccomp kills calls made through any other (i386, x32).
    architectures: [a === 'x64' ? 'SCMP_ARCH_X86_64' : 'SCMP_ARCH_AARCH64'],
    syscalls: [...grouped, ...rules],
  };
}

/** The comparisons that, each on its own, deny a call under rule `r`'s argument condition. */
function argComparisons(r: DeniedSyscall): NonNullable<ProfileRule['args']> {
  const c = r.when!;
  const eq32 = (v: number) => ({ index: c.arg, value: 0xffffffff, valueTwo: v, op: 'SCMP_CMP_MASKED_EQ' as const });
  if ('anyBit' in c) {
    const bits: number[] = [];
    for (let b = 0; b < 32; b++) if ((c.anyBit >>> b) & 1) bits.push(2 ** b);
    return bits.map((bit) => ({ index: c.arg, value: bit, valueTwo: bit, op: 'SCMP_CMP_MASKED_EQ' as const }));
  }
  if ('equals' in c) return c.equals.map(eq32);
  // notIn: deny the small gaps between allowed values one by one, and everything above the
  // largest allowed value below 2^32-1 (which also denies 2^32-1 itself: personality's query).
  const allowed = [...c.notIn].sort((x, y) => x - y);
  const below = allowed.filter((v) => v < 0xffffffff);
  const out: NonNullable<ProfileRule['args']> = [];
  for (let i = 0; i + 1 < below.length; i++) {
    const gap = below[i + 1] - below[i] - 1;
    if (gap > 0 && gap <= MAX_ENUMERATED_GAP) for (let v = below[i] + 1; v < below[i + 1]; v++) out.push(eq32(v));
  }
  if (below[0] > 0 && below[0] <= MAX_ENUMERATED_GAP) for (let v = 0; v < below[0]; v++) out.push(eq32(v));
  out.push({ index: c.arg, value: below.at(-1)!, valueTwo: 0, op: 'SCMP_CMP_GT' });
  return out;
}

/**
 * Writes the profile to `<root>/seccomp/apptainer-<hash>.json` (world-readable, content-addressed,
 * written atomically) and returns the path for ApptainerHardening.seccompProfile.
 */
export function installApptainerSeccomp(root: string, arch: string = process.arch): string {
  const text = JSON.stringify(apptainerSeccompProfile(arch), null, 2) + '\n';
  const dir = path.join(root, 'seccomp');
  const file = path.join(dir, `apptainer-${createHash('sha256').update(text).digest('hex').slice(0, 16)}.json`);
  if (fs.existsSync(file)) return file;
  fs.mkdirSync(dir, { recursive: true, mode: 0o755 });
  const tmp = `${file}.tmp-${process.pid}-${randomBytes(3).toString('hex')}`;
  fs.writeFileSync(tmp, text, { mode: 0o644 });
  fs.chmodSync(tmp, 0o644);
  fs.renameSync(tmp, file);
  return file;
}
