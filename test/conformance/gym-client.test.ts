import { describe, expect, it } from 'vitest';
import { convertProrlMessages, convertTools, extractInputMessages, type GymItem } from './gym-client.js';

// The port in gym-client.ts must read as Gym reads, or the suite proves nothing: Gym's own unit
// tests, replayed on the port. Source: NVIDIA-NeMo/Gym responses_api_agents/prorl_agent/tests/
// test_run_prorl.py and test_utils.py @b785ff0 (refs/pull/1290/head).

describe("gym-client.ts passes NeMo-Gym's own tests of the code it ports", () => {
  it('system, user and developer messages; empty content skipped (test_run_prorl.py@b785ff0:35-70)', () => {
    expect(convertProrlMessages([])).toEqual([]);
    expect(convertProrlMessages([{ role: 'system', content: 'You are a helpful assistant.' }])).toEqual([
      { type: 'message', role: 'system', text: 'You are a helpful assistant.' },
    ]);
    expect(convertProrlMessages([{ role: 'developer', content: 'Developer instructions.' }])[0]).toMatchObject({ role: 'developer' });
    expect(convertProrlMessages([{ role: 'system', content: '' }])).toEqual([]);
  });

  it('assistant messages: token fields mapped, [] when absent, None content as "" (test_run_prorl.py@b785ff0:72-100, 226-231)', () => {
    const [a] = convertProrlMessages([
      { role: 'assistant', content: "I'll fix that.", token_ids: [10, 20, 30], input_ids: [1, 2, 3], logprobs: [-0.1, -0.2, -0.3] },
    ]);
    expect(a).toMatchObject({
      role: 'assistant',
      text: "I'll fix that.",
      generation_token_ids: [10, 20, 30],
      prompt_token_ids: [1, 2, 3],
      generation_log_probs: [-0.1, -0.2, -0.3],
    });
    const [b] = convertProrlMessages([{ role: 'assistant', content: 'response' }]);
    expect(b).toMatchObject({ generation_token_ids: [], prompt_token_ids: [], generation_log_probs: [] });
    expect(convertProrlMessages([{ role: 'assistant', content: null }])[0]).toMatchObject({ text: '' });
  });

  it('tool calls get call_1, call_2, …; dict arguments are JSON (test_run_prorl.py@b785ff0:102-141)', () => {
    const r = convertProrlMessages([
      { role: 'assistant', content: 'Let me run a command.', tool_calls: [{ name: 'bash', arguments: '{"command": "ls"}' }] },
    ]);
    expect(r).toHaveLength(2);
    expect(r[1]).toMatchObject({ type: 'function_call', name: 'bash', arguments: '{"command": "ls"}', call_id: 'call_1' });
    const d = convertProrlMessages([
      { role: 'assistant', content: '', tool_calls: [{ name: 'edit', arguments: { file: 'test.py', content: 'print()' } }] },
    ]);
    expect(JSON.parse((d[1] as { arguments: string }).arguments)).toEqual({ file: 'test.py', content: 'print()' });
  });

  it('tool messages: paired by order without an id, by id when it names a pending call, dropped when orphaned (test_run_prorl.py@b785ff0:143-179)', () => {
    const byOrder = convertProrlMessages([
      { role: 'assistant', content: 'Running command.', tool_calls: [{ name: 'bash', arguments: '{}' }] },
      { role: 'tool', content: 'command output' },
    ]);
    expect(byOrder[2]).toEqual({ type: 'function_call_output', call_id: 'call_1', output: 'command output' });
    const byId = convertProrlMessages([
      { role: 'assistant', content: '', tool_calls: [{ name: 'bash', arguments: '{}' }] },
      { role: 'tool', content: 'result', tool_call_id: 'call_1' },
    ]);
    expect(byId[2]).toMatchObject({ type: 'function_call_output', call_id: 'call_1' });
    expect(convertProrlMessages([{ role: 'tool', content: 'orphan output' }])).toEqual([]);
  });

  it('a multi-turn trajectory: call ids match across calls and outputs (test_run_prorl.py@b785ff0:181-224)', () => {
    const r = convertProrlMessages([
      { role: 'system', content: 'System prompt.' },
      { role: 'user', content: 'Fix the bug.' },
      {
        role: 'assistant',
        content: 'Let me check.',
        tool_calls: [
          { name: 'bash', arguments: '{"cmd": "cat file.py"}' },
          { name: 'edit', arguments: '{"file": "file.py"}' },
        ],
        token_ids: [100, 200],
        input_ids: [1, 2],
        logprobs: [-0.5, -0.6],
      },
      { role: 'tool', content: 'file contents' },
      { role: 'tool', content: 'edit success' },
      { role: 'assistant', content: 'Done.', token_ids: [300], input_ids: [3], logprobs: [-0.1] },
    ]);
    expect(r.map((i) => (i.type === 'message' ? i.role : i.type))).toEqual([
      'system',
      'user',
      'assistant',
      'function_call',
      'function_call',
      'function_call_output',
      'function_call_output',
      'assistant',
    ]);
    expect(r.filter((i) => i.type !== 'message').map((i) => (i as { call_id: string }).call_id)).toEqual([
      'call_1',
      'call_2',
      'call_1',
      'call_2',
    ]);
  });

  it('message ids count the items before them (test_run_prorl.py@b785ff0:233-243)', () => {
    const r = convertProrlMessages([
      { role: 'system', content: 'sys' },
      { role: 'assistant', content: 'msg1' },
      { role: 'assistant', content: 'msg2' },
    ]);
    expect(r.slice(1).map((i) => (i as { id: string }).id)).toEqual(['msg-1', 'msg-2']);
  });

  it('input messages stop at the first assistant message or function call (test_utils.py@b785ff0:102-140)', () => {
    const sys: GymItem = { type: 'message', role: 'system', text: 'sys' };
    const dev: GymItem = { type: 'message', role: 'developer', text: 'dev' };
    const asst: GymItem = {
      type: 'message',
      role: 'assistant',
      id: 'msg-2',
      text: 'hi',
      prompt_token_ids: [],
      generation_token_ids: [],
      generation_log_probs: [],
    };
    const call: GymItem = { type: 'function_call', call_id: 'call1', id: 'call1', name: 'x', arguments: '{}' };
    expect(extractInputMessages([sys, dev, asst])).toEqual({
      input: [
        { role: 'system', content: 'sys' },
        { role: 'developer', content: 'dev' },
      ],
      output: [asst],
    });
    expect(extractInputMessages([])).toEqual({ input: [], output: [] });
    expect(extractInputMessages([sys, call])).toEqual({ input: [{ role: 'system', content: 'sys' }], output: [call] });
  });

  it('tools: only ChatCompletion function definitions are kept (utils.py@b785ff0:377-402)', () => {
    expect(
      convertTools([{ type: 'function', function: { name: 'bash', description: 'd', parameters: {} } }, { name: 'flat' }]).map(
        (t) => t.name,
      ),
    ).toEqual(['bash']);
  });
});
