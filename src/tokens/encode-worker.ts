import { parentPort, workerData } from 'node:worker_threads';
import { loadTokenizer } from './local.js';
import { qwen3Tokenizer, type TokenizerOrigin } from './tokenizer.js';

/** A request: text runs to encode (each with its section index); the answer holds one Int32Array per run. */
export interface EncodeRequest {
  id: number;
  runs: Array<{ text: string; index: number }>;
}

const origin = workerData as TokenizerOrigin;
const tok = origin.kind === 'bundled' ? qwen3Tokenizer() : loadTokenizer(origin.dir);
parentPort!.on('message', (req: EncodeRequest) => {
  try {
    const ids = req.runs.map((r) => Int32Array.from(tok.encodeChunks([r])));
    parentPort!.postMessage(
      { id: req.id, ids },
      ids.map((a) => a.buffer),
    );
  } catch (err) {
    parentPort!.postMessage({ id: req.id, error: err instanceof Error ? err.message : String(err) });
  }
});
parentPort!.postMessage({ ready: true });
