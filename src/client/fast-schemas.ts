import { z } from 'zod';
import { JobResponse, Message, Result, Tokens } from '../protocol/process.js';

/*
 * The protocol's Result schema validates token arrays element by element; for an 8k-token result
 * (five arrays) that costs about four times the JSON.parse of the answer itself, on the
 * coordinator's single thread. The client parses answers with these derived schemas instead: the
 * same shape and field rules, but each token array is checked by one plain loop (a quarter of the
 * JSON.parse). Everything else is the protocol schema, extended, so changes there carry over.
 */

function isIdArray(v: unknown): v is number[] {
  if (!Array.isArray(v)) return false;
  for (let i = 0; i < v.length; i++) {
    const x = v[i];
    if (typeof x !== 'number' || !Number.isInteger(x) || x < 0) return false;
  }
  return true;
}

function isNumberArray(v: unknown): v is number[] {
  if (!Array.isArray(v)) return false;
  for (let i = 0; i < v.length; i++) if (typeof v[i] !== 'number' || Number.isNaN(v[i])) return false;
  return true;
}

function isMask(v: unknown): v is Array<0 | 1> {
  if (!Array.isArray(v)) return false;
  for (let i = 0; i < v.length; i++) if (v[i] !== 0 && v[i] !== 1) return false;
  return true;
}

const Ids = z.custom<number[]>(isIdArray, 'expected an array of token ids (non-negative integers)');
const Numbers = z.custom<number[]>(isNumberArray, 'expected an array of numbers');
const Mask = z.custom<Array<0 | 1>>(isMask, 'expected an array of 0 and 1');

/** Tokens, with loop-checked arrays. */
const TokensFast = Tokens.extend({ prompt_ids: Ids, response_ids: Ids, response_mask: Mask, logprobs: Numbers });

/** Message, with loop-checked token_ids, input_ids and logprobs. */
const MessageFast = Message.extend({ token_ids: Ids.optional(), input_ids: Ids.optional(), logprobs: Numbers.optional() });

/** Result as the client parses it: the protocol's Result with the fast token arrays. */
export const ResultFast = Result.extend({ messages: z.array(MessageFast), tokens: TokensFast });

/** GET /jobs/:id answer as the client parses it. */
export const JobResponseFast = JobResponse.extend({ result: ResultFast.optional() });
