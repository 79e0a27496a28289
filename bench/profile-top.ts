/**
 * Top self-time entries of a V8 CPU profile (bench/server-profile.ts's PROF_OUT, or node --cpu-prof):
 *
 *   npx tsx bench/profile-top.ts /tmp/raas.cpuprofile [count]
 *
 * Percentages are of the busy (non-idle) samples.
 */
import fs from 'node:fs';

interface Node {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
}
const [file, count = '15'] = process.argv.slice(2);
if (!file) throw new Error('usage: bench/profile-top.ts <file.cpuprofile> [count]');
const p = JSON.parse(fs.readFileSync(file, 'utf8')) as { nodes: Node[]; samples: number[]; timeDeltas: number[] };
const byId = new Map(p.nodes.map((n) => [n.id, n]));
const self = new Map<string, number>();
let busy = 0;
p.samples.forEach((id, i) => {
  const cf = byId.get(id)!.callFrame;
  if (cf.functionName === '(idle)') return;
  const d = p.timeDeltas[i] ?? 0;
  busy += d;
  const where = cf.url
    ? ` ${cf.url.replace(/^.*node_modules\//, '').replace(/^file:\/\/.*?\/(dist|src)\//, '$1/')}:${cf.lineNumber + 1}`
    : '';
  const key = `${cf.functionName || '(anonymous)'}${where}`;
  self.set(key, (self.get(key) ?? 0) + d);
});
console.log(`busy ${(busy / 1000).toFixed(0)} ms`);
for (const [k, v] of [...self].sort((a, b) => b[1] - a[1]).slice(0, Number(count)))
  console.log(`${((100 * v) / busy).toFixed(1).padStart(5)} %  ${k}`);
