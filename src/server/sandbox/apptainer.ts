import { INSIDE } from './bwrap.js';
import { findBinary } from './host.js';

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
  command: string[];
}

/**
 * The `apptainer exec` command line for one sandbox: --containall (own pid and ipc namespaces,
 * clean environment, no host home), --writable-tmpfs, a private network with only loopback unless
 * the task asks for network, the workspace and socket directory bound writable, the tool server
 * read-only, and --fakeroot when configured.
 */
export function apptainerArgs(i: ApptainerArgsInput): string[] {
  const a = ['exec', '--containall', '--writable-tmpfs'];
  if (i.fakeroot) a.push('--fakeroot');
  if (!i.network) a.push('--net', '--network', 'none');
  a.push('--bind', `${i.workspace}:${INSIDE.workspace}`);
  a.push('--bind', `${i.run}:${INSIDE.run}`);
  a.push('--bind', `${i.toolServer}:${INSIDE.toolServer}:ro`);
  a.push('--pwd', INSIDE.workspace);
  for (const [k, v] of Object.entries(i.env)) a.push('--env', `${k}=${v}`);
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
