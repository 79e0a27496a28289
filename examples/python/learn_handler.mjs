// The task of examples/python/learn.py, loaded by `raas serve --handler examples/python/learn_handler.mjs`.
// An instance is {data_source: "digits", instance_id, target: "0".."9"}: the model is asked for that
// digit and earns reward 1 when its first token is it. One model turn, no sandbox, no tools.

/** Standard Schema of an instance (no dependency): `target` must be one digit. */
const DigitsInstance = {
  '~standard': {
    version: 1,
    vendor: 'raas-example',
    validate(v) {
      if (!v || typeof v !== 'object') return { issues: [{ message: 'expected an object', path: [] }] };
      if (typeof v.target !== 'string' || !/^[0-9]$/.test(v.target)) return { issues: [{ message: 'expected one digit "0".."9"', path: ['target'] }] };
      return { value: v };
    },
  },
};

/** Qwen3's id of the digit "0"; "1".."9" follow. */
const DIGIT_0 = 15;

export default {
  name: 'digits',
  instance: DigitsInstance,
  async init() {
    return {};
  },
  async run(ctx) {
    const { tokenizer: tok, llm, signal } = ctx;
    const user = { role: 'user', content: `Reply with the digit ${ctx.job.instance.target}.` };
    const prompt = tok.renderPrompt([user], { enableThinking: false });
    const budget = ctx.job.samplingParams.max_tokens_per_turn ?? 4;
    const ids = [];
    const logprobs = [];
    // A call a paused server cut (pause_generation mode "abort") is continued after the resume,
    // from the ids it had produced, as the built-in agent loop continues a turn.
    for (let calls = 0; ids.length < budget && calls < 8; calls++) {
      const r = await llm.generate({ prompt_ids: [...prompt, ...ids], max_tokens: budget - ids.length, stop_token_ids: [tok.eosId], signal });
      ids.push(...r.ids);
      logprobs.push(...r.logprobs);
      if (r.finish_reason !== 'abort') break;
    }
    const ended = ids[ids.length - 1] === tok.eosId;
    const assistant = { role: 'assistant', content: tok.decode(ended ? ids.slice(0, -1) : ids), token_ids: ids, logprobs };
    return {
      messages: [user, assistant],
      tokens: { prompt_ids: prompt, response_ids: ids, response_mask: ids.map(() => 1), logprobs, spans: [{ message_index: 1, start: 0, end: ids.length }] },
      finish_reason: ended ? 'finish' : 'max_response_tokens',
      artifacts: { first: ids[0] ?? null },
      num_turns: 1,
    };
  },
  async eval(ctx) {
    const ok = ctx.run.artifacts.first === DIGIT_0 + Number(ctx.job.instance.target);
    return { reward: ok ? 1 : 0, resolved: ok };
  },
};
