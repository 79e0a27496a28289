import path from 'node:path';
import { cancellationKind } from '../../../protocol/errors.js';
import type { HarnessHandlerConfig, HarnessSpec } from '../../../protocol/harness.js';
import type { FinishReason } from '../../../protocol/process.js';
import { JobGateway } from '../../gateway/engine.js';
import type { GatewayEndpoint } from '../../gateway/host.js';
import type { RelayOptions } from '../../gateway/relay-main.js';
import { toolParser } from '../../gateway/tool-parsers.js';
import type { Sandbox } from '../../sandbox/types.js';
import type { RunContext } from '../types.js';
import { gatewayRecord, type GatewayRecord } from './segments.js';

/** Where a job's gateway directory (socket and relay) appears inside its sandbox. */
export const GATEWAY_INSIDE = '/run/raas-gateway';
/** Where a harness's directory appears inside the sandbox. */
export const harnessInside = (name: string): string => `/opt/raas/harness/${name}`;

/** What running a harness leaves: its exit, its output's tail, and its gateway's record. */
export interface HarnessOutcome {
  exit_code: number | null;
  signal: string | null;
  timed_out: boolean;
  output_tail: string;
  finish_reason: FinishReason;
  record: GatewayRecord;
}

/**
 * Runs one harness to its end: attaches the job's gateway to its endpoint, starts the relay (which
 * starts the harness) inside the sandbox with the task prompt on stdin, and waits for it under the
 * harness's timeout and the job's signal. The gateway refuses calls once this returns.
 */
export async function runHarness<I>(
  ctx: RunContext<I>,
  o: { cfg: HarnessHandlerConfig; name: string; spec: HarnessSpec; endpoint: GatewayEndpoint; sandbox: Sandbox; prompt: string },
): Promise<HarnessOutcome> {
  const { cfg, name, spec, endpoint, sandbox } = o;
  const gateway = new JobGateway({
    llm: ctx.llm,
    tokenizer: ctx.tokenizer,
    sampling: ctx.job.samplingParams,
    parser: toolParser(cfg.tool_parser),
    maxTokensPerTurn: cfg.max_tokens_per_turn,
    maxSegments: cfg.max_segments,
  });
  // Unisolated sandboxes (the process runtime) see host paths as they are.
  const gwDir = sandbox.isolated ? GATEWAY_INSIDE : endpoint.dir;
  const harnessDir = spec.dir ? (sandbox.isolated ? harnessInside(name) : path.resolve(spec.dir)) : undefined;
  // Unisolated sandboxes keep the HOME their runtime gives (the workspace): the relay falls back to it.
  const home = sandbox.isolated ? '/tmp/raas-home' : undefined;
  const PATH = [
    ...(harnessDir ? [`${harnessDir}/bin`, `${harnessDir}/node_modules/.bin`] : []),
    '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
  ].join(':');
  const relay: RelayOptions = {
    socket: path.posix.join(gwDir, 'gateway.sock'),
    command: spec.command,
    env: { ...(home ? { HOME: home } : {}), PATH, ...spec.env },
    prompt: { mode: spec.prompt, file: spec.prompt_file },
    tail_bytes: cfg.output_tail_bytes,
    files: spec.files,
  };
  await endpoint.attach(gateway, ctx.signal, cfg.model);
  let exit: { exit_code: number | null; signal: string | null; timed_out: boolean; output_tail: string };
  let finish: FinishReason;
  try {
    const r = await sandbox.exec([cfg.node, path.posix.join(gwDir, 'relay.mjs'), JSON.stringify(relay)], {
      stdin: o.prompt,
      env: { PATH, ...(home ? { HOME: home } : {}) },
      timeout_s: spec.timeout_s,
      maxOutputBytes: cfg.output_tail_bytes * 2 + 4096,
      signal: ctx.signal,
    });
    const tail = `${r.stdout}${r.stderr ? `\n${r.stderr}` : ''}`;
    exit = { exit_code: r.exit_code, signal: r.signal, timed_out: r.timed_out, output_tail: tail.slice(-cfg.output_tail_bytes) };
    finish = gateway.limit ?? (r.timed_out ? 'timeout' : r.exit_code === 0 ? 'finish' : 'error');
  } catch (err) {
    // Cancelled or timed out: the trajectory so far is still the result's.
    const kind = cancellationKind(ctx.signal.aborted ? ctx.signal.reason : err);
    if (!kind) throw err;
    exit = { exit_code: null, signal: null, timed_out: kind === 'timeout', output_tail: '' };
    finish = kind === 'timeout' ? 'timeout' : 'cancelled';
  } finally {
    gateway.close();
    await endpoint.close();
  }
  return { ...exit, finish_reason: finish, record: gatewayRecord(gateway) };
}
