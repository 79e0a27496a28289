import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { SimDifficulty, difficultyModel, linearPassRate } from '../../src/sim/difficulty.js';
import { startSim } from '../../src/sim/index.js';
import { parseCalls } from '../../src/sim/policies/transcript.js';
import { firstMessages } from '../../src/server/handlers/common/run.js';
import { toolDefinitions } from '../../src/server/handlers/common/tools.js';
import { mathPrompt } from '../../src/server/handlers/math/index.js';
import { qwen3Tokenizer } from '../../src/tokens/index.js';
import { readFileSync } from 'node:fs';

const ROOT = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../..');
const MATH = path.join(ROOT, 'configs/data/math.jsonl');

describe("the simulator's difficulty models", () => {
  it('beta (default): the Beta draw plus boost_per_update per update, capped at 1; an instance drawn at 0 stays unsolved', () => {
    const m = difficultyModel(SimDifficulty.parse({}), { seed: 0, boostPerUpdate: 0.05 });
    expect(m.passRate('x', 0.3, 4)).toBeCloseTo(0.5, 12);
    expect(m.passRate('x', 0.9, 4)).toBe(1);
    expect(m.passRate('x', 0, 40)).toBe(0);
    expect(linearPassRate(0.2, 0.1, 3)).toBeCloseTo(0.5, 12);
  });

  const logit = difficultyModel(SimDifficulty.parse({ model: 'logit' }), { seed: 11, boostPerUpdate: 0 });
  const keys = Array.from({ length: 4000 }, (_, i) => `math:k${i}`);
  const at = (u: number) => keys.map((k) => logit.passRate(k, 0.5, u));
  const share = (ps: number[], f: (p: number) => boolean) => ps.filter(f).length / ps.length;

  it('logit: many instances near 0 and near 1, a band in between, and the equal-reward share of a real dataset', () => {
    const ps = at(0);
    expect(share(ps, (p) => p === 0)).toBeGreaterThan(0.07); // unsolvable: 10 %
    expect(share(ps, (p) => p === 0)).toBeLessThan(0.13);
    expect(share(ps, (p) => p < 0.05)).toBeGreaterThan(0.25);
    expect(share(ps, (p) => p > 0.95)).toBeGreaterThan(0.12);
    expect(share(ps, (p) => p >= 0.2 && p <= 0.8)).toBeGreaterThan(0.25);
    // groups of 8 with equal rewards: p^8 + (1 − p)^8, about 0.6 on average
    const uniform = ps.reduce((a, p) => a + p ** 8 + (1 - p) ** 8, 0) / ps.length;
    expect(uniform).toBeGreaterThan(0.5);
    expect(uniform).toBeLessThan(0.7);
  });

  it('logit: moves as the weights update (most instances get easier, some harder), deterministic per seed and key', () => {
    const before = at(0);
    const after = at(20);
    const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
    expect(mean(after)).toBeGreaterThan(mean(before) + 0.1);
    const harder = keys.filter((_, i) => after[i]! < before[i]! - 1e-9).length / keys.length;
    expect(harder).toBeGreaterThan(0.05);
    expect(harder).toBeLessThan(0.3);
    const again = difficultyModel(SimDifficulty.parse({ model: 'logit' }), { seed: 11, boostPerUpdate: 0 });
    expect(keys.slice(0, 50).map((k) => again.passRate(k, 0.5, 3))).toEqual(keys.slice(0, 50).map((k) => logit.passRate(k, 0.5, 3)));
    const other = difficultyModel(SimDifficulty.parse({ model: 'logit' }), { seed: 12, boostPerUpdate: 0 });
    expect(keys.slice(0, 50).map((k) => other.passRate(k, 0.5, 3))).not.toEqual(keys.slice(0, 50).map((k) => logit.passRate(k, 0.5, 3)));
  });

  it("drives the scripted policies: a simulated vLLM backend answers right at the model's rate, before and after weight updates", async () => {
    const tok = qwen3Tokenizer();
    const rows = readFileSync(MATH, 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { instance_id: string; problem: string; answer: string });
    const model = difficultyModel(SimDifficulty.parse({ model: 'logit' }), { seed: 5, boostPerUpdate: 0 });
    // the instance whose pass rate is nearest one half (so both outcomes show)
    const row = rows
      .map((r) => ({ r, p: model.passRate(`math:${r.instance_id}`, 0, 0) }))
      .sort((a, b) => Math.abs(a.p - 0.5) - Math.abs(b.p - 0.5))[0]!.r;
    const sim = await startSim({ seed: 5, datasets: [MATH], difficulty: { model: 'logit' } });
    try {
      const ids = tok.renderPrompt(firstMessages('s', mathPrompt(row.problem)), {
        tools: toolDefinitions(['execute_ipython_cell', 'think', 'finish']),
      });
      const rightShare = async (): Promise<number> => {
        let right = 0;
        let seen = 0;
        for (let i = 0; i < 300; i++) {
          const out = await sim.generate({
            api: 'vllm',
            request_id: `r${i}`,
            prompt_ids: ids,
            max_tokens: 512,
            seed: i,
            stop_token_ids: [],
          });
          const call = parseCalls(tok.decode(out.ids))[0];
          if (call?.name !== 'execute_ipython_cell') continue; // the plan that thinks first decides at its next turn
          seen++;
          if (String(call.arguments.code).includes(JSON.stringify(row.answer))) right++;
        }
        return right / seen;
      };
      const p0 = model.passRate(`math:${row.instance_id}`, 0, 0);
      expect(Math.abs((await rightShare()) - p0)).toBeLessThan(0.12);
      for (let u = 0; u < 10; u++)
        await fetch(`${sim.url}/finish_weight_update`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
      const p10 = model.passRate(`math:${row.instance_id}`, 0, 10);
      expect(Math.abs(p10 - p0)).toBeGreaterThan(0.05);
      expect(Math.abs((await rightShare()) - p10)).toBeLessThan(0.12);
    } finally {
      await sim.close();
    }
  }, 60_000);
});
