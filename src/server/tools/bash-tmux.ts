import { execFile, execFileSync } from 'node:child_process';
import path from 'node:path';
import { ToolInputError, type BashAnswer, type BashRequest } from './bash-pty.js';
import { capText } from './output-cap.js';
import { ulimitPrefix } from './limits.js';
import type { ToolServerOptions } from './protocol.js';
import { randomHex } from './random.js';

/** OpenHands' poll interval for tmux capture-pane. */
const OPENHANDS_POLL_MS = 500;

function tmux(args: string[], env: NodeJS.ProcessEnv): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile('tmux', args, { env, maxBuffer: 64 << 20 }, (err, stdout) => (err ? reject(err) : resolve(stdout)));
  });
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/**
 * The tmux approach of OpenHands, kept only as the baseline for benchmarks and ablations: send-keys,
 * then poll capture-pane until a PS1 marker carrying the exit code appears. Every tmux call is a
 * process spawn, and completion is seen only at the next poll.
 */
export class TmuxBash {
  private readonly nonce = randomHex(6);
  private readonly socket: string;
  private readonly env: NodeJS.ProcessEnv;
  private started = false;
  private busy = false;
  private readonly pollMs: number;
  private readonly marker: RegExp;

  constructor(private readonly opts: ToolServerOptions) {
    this.socket = path.join(opts.tmp_dir ?? '/tmp', `.raas-tmux-${this.nonce}.sock`);
    // tmux runs pane commands through $SHELL, else the passwd shell, which is nologin for the sandbox user.
    this.env = { ...(opts.env ?? {}), PATH: opts.env?.PATH ?? process.env.PATH ?? '/usr/bin:/bin', SHELL: '/bin/bash' };
    this.pollMs = opts.tmux_poll_ms ?? OPENHANDS_POLL_MS;
    this.marker = new RegExp(`\\[RAAS_${this.nonce}:(\\d+)\\]`, 'g');
  }

  private t(...args: string[]): Promise<string> {
    return tmux(['-S', this.socket, ...args], this.env);
  }

  private async start(): Promise<void> {
    const shell = `${ulimitPrefix(this.opts.limits)}exec /bin/bash --noprofile --norc`;
    await this.t('-f', '/dev/null', 'new-session', '-d', '-s', 'raas', '-x', '250', '-y', '50', '-c', this.opts.workspace, shell);
    await this.t('send-keys', '-t', 'raas', '-l', `export PS1='[RAAS_${this.nonce}:$?]\\n' PS2='' PAGER=cat GIT_PAGER=cat HISTFILE=`);
    await this.t('send-keys', '-t', 'raas', 'Enter');
    await this.waitMarkers(1, 10_000);
    this.started = true;
  }

  private async capture(): Promise<string> {
    return this.t('capture-pane', '-p', '-J', '-S', '-', '-t', 'raas');
  }

  private count(text: string): RegExpExecArray[] {
    return [...text.matchAll(this.marker)];
  }

  private async waitMarkers(n: number, timeoutMs: number): Promise<{ text: string; found: boolean }> {
    const until = Date.now() + timeoutMs;
    for (;;) {
      const text = await this.capture();
      if (this.count(text).length >= n) return { text, found: true };
      if (Date.now() >= until) return { text, found: false };
      await sleep(this.pollMs);
    }
  }

  async run(req: BashRequest): Promise<BashAnswer> {
    if (this.busy) throw new ToolInputError('another bash command is still waiting for its answer; bash runs one command at a time');
    this.busy = true;
    try {
      if (!this.started) await this.start();
      await this.t('clear-history', '-t', 'raas');
      const before = this.count(await this.capture()).length;
      if (req.is_input) {
        await this.t('send-keys', '-t', 'raas', req.command);
      } else {
        await this.t('send-keys', '-t', 'raas', '-l', req.command);
        await this.t('send-keys', '-t', 'raas', 'Enter');
      }
      // OpenHands sleeps one poll interval before the first capture.
      await sleep(this.pollMs);
      const { text, found } = await this.waitMarkers(before + 1, (req.timeout_s ?? 120) * 1000);
      if (!found) await this.t('send-keys', '-t', 'raas', 'C-c');
      const ms = this.count(text);
      const prev = ms[before - 1];
      const end = ms[before];
      const from = prev ? prev.index! + prev[0].length : 0;
      let body = text.slice(from, end ? end.index : undefined);
      // Drop the echoed command line.
      body = body.replace(/^\n/, '');
      const nl = body.indexOf('\n');
      body = nl >= 0 ? body.slice(nl + 1) : '';
      const { text: output, truncated } = capText(body.replace(/\n+$/, ''), this.opts.output_cap ?? 30_000);
      return { output, exit_code: end ? Number(end[1]) : null, timed_out: !found, truncated };
    } finally {
      this.busy = false;
    }
  }

  interrupt(): void {
    void this.t('send-keys', '-t', 'raas', 'C-c').catch(() => undefined);
  }

  close(): void {
    // Synchronous: the tmux server daemonizes, so nothing else would end it if we exited first.
    try {
      execFileSync('tmux', ['-S', this.socket, 'kill-server'], { env: this.env, stdio: 'ignore', timeout: 5000 });
    } catch {
      /* not running */
    }
    this.started = false;
  }
}
