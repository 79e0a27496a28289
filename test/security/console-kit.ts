// Red-team kit for the browser console and `raas view`: hostile strings that run script or load a
// resource if any page renders them as HTML, a canary listener that records every request they
// make, a run directory whose every string is hostile, and raw HTTP requests (fetch normalises the
// paths and Host headers an attacker sends as they are).
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';

/** A local listener that records every request the hostile strings make (scripts, images, frames, styles). */
export interface Canary {
  url: string;
  /** Paths requested so far, e.g. `/job-output/img`. */
  hits: string[];
  close(): Promise<void>;
}

/** Starts the canary on 127.0.0.1, port 0. Any request is recorded and answered 200 with CORS open. */
export async function startCanary(): Promise<Canary> {
  const hits: string[] = [];
  const srv = http.createServer((req, res) => {
    hits.push(req.url ?? '');
    res.writeHead(200, { 'access-control-allow-origin': '*', 'content-type': 'text/plain' });
    res.end('ok');
  });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  const addr = srv.address() as { port: number };
  return {
    url: `http://127.0.0.1:${addr.port}`,
    hits,
    close: () =>
      new Promise((r) => {
        srv.closeAllConnections();
        srv.close(() => r());
      }),
  };
}

/**
 * Hostile text for one field: every classic way a string turns into markup or script (tags with
 * handlers, a script block, breaking out of an attribute, `javascript:` URLs, a plain image, a style
 * import, a mutation-XSS shape, a template-engine expression, a markdown link). Each vector pings
 * `<canary>/<field>/<vector>`, so a hit names the field and the vector, and each also sets
 * `window.__raas_pwned` and opens a dialog. `marker` is plain text a test looks for on the page, to
 * prove the field really was drawn.
 */
export function hostile(canary: string, field: string): { text: string; marker: string } {
  const ping = (v: string): string => `${canary}/${field}/${v}`;
  const js = (v: string): string => `window.__raas_pwned='${field}/${v}';fetch('${ping(v)}');alert('${field}/${v}')`;
  const marker = `RTXSS-${field}`;
  const text = [
    marker,
    `<img src=x onerror="${js('img-onerror')}">`,
    `<script>${js('script')}</script>`,
    `"><svg onload="${js('attr-break')}">`,
    `'><iframe src="javascript:${js('iframe-js')}"></iframe>`,
    `<img src="${ping('plain-img')}">`,
    `<style>@import url('${ping('style-import')}');</style>`,
    `<math><mtext><table><mglyph><style><img src=x onerror="${js('mxss')}">`,
    `javascript:${js('js-url')}`,
    `{{constructor.constructor("${js('template')}")()}}`,
    `[link](javascript:${js('markdown')})`,
    `<a href="javascript:${js('anchor')}" id="rt-anchor-${field}">click</a>`,
    `<object data="${ping('object')}"></object><embed src="${ping('embed')}">`,
    `<link rel="stylesheet" href="${ping('link-css')}">`,
    `<base href="${ping('base')}/">`,
    `<meta http-equiv="refresh" content="0;url=${ping('meta-refresh')}">`,
    '\u2028\u2029</script><!--',
  ].join('\n');
  return { text, marker };
}

/** A hostile string short enough for a field with a length cap (an id of at most 256 characters). */
export function hostileShort(canary: string, field: string): { text: string; marker: string } {
  const marker = `RTXSS-${field}`;
  return { text: `${marker}<img src=x onerror="fetch('${canary}/${field}/img-onerror')"><svg onload=alert('${field}')>`, marker };
}

/** A raw HTTP/1.1 GET with the path and headers exactly as given (no normalisation). */
export function rawGet(
  base: string,
  rawPath: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: string }> {
  const u = new URL(base);
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host: u.hostname, port: u.port, path: rawPath, method: 'GET', headers, setHost: !('host' in headers) },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => {
          body += c;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
      },
    );
    req.on('error', reject);
    req.setTimeout(10_000, () => req.destroy(new Error(`GET ${rawPath}: no answer in 10 s`)));
    req.end();
  });
}

/** A step of a hostile run: every string a page of `raas view` draws is hostile. */
function hostileRollout(h: (field: string) => string, job: string, reward: number): Record<string, unknown> {
  return {
    job_id: job,
    trajectory_id: h('trajectory_id'),
    reward,
    shaped_reward: reward,
    advantage: reward - 0.5,
    policy_version: 0,
    staleness: 0,
    weight_versions: [h('run-weight_version')],
    finish_reason: h('run-finish_reason'),
    num_turns: 2,
    tokens: {
      prompt_ids: [27, 1805, 29],
      response_ids: [27, 2282, 29, 151645],
      response_mask: [1, 1, 1, 0],
      logprobs: [-0.1, -3, -0.2, 0],
    },
    messages: [
      { role: 'system', content: h('run-system') },
      { role: 'user', content: h('run-user') },
      {
        role: 'assistant',
        content: `<think>${h('run-thinking')}</think>${h('run-answer')}<tool_call>{"name":${JSON.stringify(h('run-tool-name'))},"arguments":{"command":${JSON.stringify(h('run-tool-arg'))}}}</tool_call><tool_call>${h('run-malformed-call')}</tool_call>`,
        tool_calls: [{ id: h('run-call-id'), type: 'function', function: { name: h('run-fn-name'), arguments: h('run-fn-args') } }],
      },
      { role: 'tool', content: h('run-observation'), tool_call_id: h('run-tool-call-id') },
    ],
    details: { [h('run-details-key')]: h('run-details-value'), answer: h('run-answer-extracted'), ground_truth: h('run-ground-truth') },
    critical_error: 'run',
    error: h('run-error'),
  };
}

/**
 * Writes a run directory of `raas train`'s shape (docs/batch-format.md) whose strings are all hostile:
 * metric names and values, the summary, a step's batch (group and instance ids, data source, every
 * message, tool call, observation, detail and error of its rollouts), groups.jsonl (verdicts,
 * rollouts), config.json. The directory's own name is hostile too (a run's title is its path).
 * Returns the run directory and the job ids of its rollouts.
 */
export function writeHostileRun(parent: string, canary: string): { dir: string; jobs: string[]; markers: string[] } {
  const markers: string[] = [];
  const h = (field: string): string => {
    const x = hostile(canary, field);
    markers.push(x.marker);
    return x.text;
  };
  // A file name may hold anything but '/' and NUL: a tag whose handler needs no slash.
  const dir = path.join(parent, `run-<img src=x onerror="window.__raas_pwned='dirname';alert('dirname')">`);
  fs.mkdirSync(path.join(dir, 'batches'), { recursive: true });
  const jobs = [`job-${hostileShort(canary, 'run-job_id').text}`, 'plain-job'];
  const rollouts = [hostileRollout(h, jobs[0]!, 1), hostileRollout(h, jobs[1]!, 0)];
  const batch = {
    step: 0,
    policy_version: 0,
    groups: [{ group_id: h('run-group_id'), instance_id: h('run-instance_id'), data_source: h('run-data_source'), rollouts }],
    stats: {
      submitted: 2,
      completed: 2,
      accepted: 1,
      filtered: 1,
      cancelled: 0,
      carried_over: 0,
      errors: 0,
      dropped_stale: 0,
      staleness_histogram: { [h('run-histogram-key')]: 2 },
      wall_s: 1,
      worker_utilization: 0.5,
      tokens_generated: 4,
      tokens_used: 4,
      mean_reward: 0.5,
    },
  };
  fs.writeFileSync(path.join(dir, 'batches', 'step-0.json'), JSON.stringify(batch));
  fs.writeFileSync(path.join(dir, 'batches.jsonl'), `${JSON.stringify(batch)}\n`);
  const metric = (step: number) => ({
    step,
    policy_version: step,
    wall_s: 1.5,
    reward_mean: 0.5,
    [h('run-metric-name')]: h('run-metric-value'),
    data_source: h('run-metric-data_source'),
  });
  fs.writeFileSync(path.join(dir, 'metrics.jsonl'), `${JSON.stringify(metric(0))}\n${JSON.stringify(metric(1))}\n`);
  fs.writeFileSync(
    path.join(dir, 'summary.json'),
    JSON.stringify({ name: h('run-summary-name'), steps: [metric(0)], [h('run-summary-key')]: h('run-summary-value') }),
  );
  fs.writeFileSync(
    path.join(dir, 'config.json'),
    JSON.stringify({ name: h('run-config-name'), embedded: { server: { tokenizer: 'qwen3' } } }),
  );
  const rejected = {
    step: 0,
    group_id: h('run-rejected-group_id'),
    instance_id: h('run-rejected-instance_id'),
    data_source: h('run-rejected-data_source'),
    verdict: h('run-rejected-verdict'),
    rewards: [1, 1],
    errors: 0,
    rollouts: [
      {
        job_id: `rej-${hostileShort(canary, 'run-rejected-job_id').text}`,
        reward: 1,
        details: { why: h('run-rejected-details') },
        error: h('run-rejected-error'),
      },
    ],
  };
  fs.writeFileSync(path.join(dir, 'groups.jsonl'), `${JSON.stringify(rejected)}\n`);
  return { dir, jobs, markers };
}
