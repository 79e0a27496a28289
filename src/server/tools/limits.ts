import path from 'node:path';
import { CONN_FD, type ToolServerOptions } from './protocol.js';

/** The shell that applies limits when the options name none (host-rooted sandboxes have bash). */
const DEFAULT_SHELL = '/bin/bash';

/**
 * Shell prefix that applies the resource limits to a child before it execs. Limits go on bash and
 * python only, never on the Node tool server (Node aborts under a small RLIMIT_AS), and they are set
 * inside the sandbox's user namespace so RLIMIT_NPROC counts this sandbox's processes, not the
 * uid's processes host-wide. `ulimit` without -S/-H sets both, so user code cannot raise them.
 */
export function ulimitPrefix(limits: ToolServerOptions['limits'], shell = DEFAULT_SHELL): string {
  // The tool server's connection to the host (CONN_FD) is inherited without close-on-exec: every
  // child closes it first, so nothing the task runs holds the host's channel.
  const parts: string[] = [`exec ${CONN_FD}<&-`];
  if (!limits) return parts.join(' && ') + ' && ';
  const int = (n: number): number => Math.max(1, Math.floor(n));
  if (limits.memory_mb) parts.push(`ulimit -v ${int(limits.memory_mb * 1024)}`);
  if (limits.cpu_s) parts.push(`ulimit -t ${int(limits.cpu_s)}`);
  // dash (Debian's /bin/sh) names the process limit -p, where bash and busybox say -u.
  if (limits.processes) parts.push(`{ ulimit -u ${int(limits.processes)} 2>/dev/null || ulimit -p ${int(limits.processes)}; }`);
  // bash counts -f in 1024-byte blocks outside POSIX mode; POSIX shells (dash, busybox ash) in 512-byte blocks.
  const block = path.basename(shell) === 'bash' ? 1024 : 2048;
  if (limits.file_size_mb) parts.push(`ulimit -f ${int(limits.file_size_mb * block)}`);
  return parts.length ? parts.join(' && ') + ' && ' : '';
}

/** argv that runs `argv` under the limits, through the shell's ulimit builtin (options.shell, default bash). */
export function withLimits(opts: Pick<ToolServerOptions, 'limits' | 'shell'>, argv: string[]): [string, string[]] {
  const shell = opts.shell ?? DEFAULT_SHELL;
  const prefix = ulimitPrefix(opts.limits, shell);
  return [shell, ['-c', `${prefix}exec "$@"`, 'raas-limits', ...argv]];
}
