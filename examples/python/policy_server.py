#!/usr/bin/env python3
"""A tiny real policy behind the vLLM token-in/token-out API, for examples/python/learn.py.

    python3 examples/python/policy_server.py --weights w.npy [--port 0] [--seed 0]

The policy is a softmax table over 11 Qwen3 tokens (the digits "0".."9" and ``<|im_end|>``): its
state is the last digit in the context (prompt + ids generated so far), so a prompt asking for a
digit conditions the first token on it. It serves the subset of vLLM that raas uses:

- ``POST /v1/completions`` with a token prompt: samples up to ``max_tokens`` ids (stopping at a
  ``stop_token_ids`` id) with the request's ``seed`` and ``temperature``, and answers ``token_ids``
  (``return_token_ids``) and ``logprobs.token_logprobs`` / ``"token_id:N"`` tokens
  (``return_tokens_as_token_ids``), exactly shaped as vLLM answers. The logprobs are those of the
  distribution it sampled from (after temperature: vLLM's ``processed_logprobs``; equal to the raw
  ones at temperature 1). ``top_p`` and ``top_k`` are not supported (the example samples at 1.0).
- ``GET /v1/models`` (with ``max_model_len``), ``GET /health``, ``GET /weight_info``.
- ``POST /update_weights {"update_info": {"path": "<.npy>"}, "weight_version": "<v>"}`` (the shape of
  vLLM's RLHF dev route): reloads the table from the file. A request generates under one table.

It prints ``policy server listening on http://127.0.0.1:<port>`` once it listens. numpy is needed.
"""
from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, List, Sequence, Tuple

import numpy as np

#: Qwen3 ids of "0".."9", then <|im_end|>: the policy's actions, in table order.
DIGITS = tuple(range(15, 25))
EOS = 151645
ACTIONS = DIGITS + (EOS,)
#: States: the last digit in the context (0..9), or none yet (10).
NO_DIGIT = 10
SHAPE = (11, len(ACTIONS))
_ACTION_INDEX = {t: i for i, t in enumerate(ACTIONS)}


def state_of(ids: Sequence[int]) -> int:
    """The table row for a context: the last digit in it, else NO_DIGIT."""
    for t in reversed(ids):
        if 15 <= t <= 24:
            return t - 15
    return NO_DIGIT


def action_index(token: int) -> int:
    """The table column of a token the policy can produce (KeyError for any other)."""
    return _ACTION_INDEX[token]


def log_softmax(row: np.ndarray) -> np.ndarray:
    z = row - row.max()
    return z - np.log(np.exp(z).sum())


def sample(table: np.ndarray, prompt: Sequence[int], max_tokens: int, seed: int, temperature: float,
           stop: Sequence[int]) -> Tuple[List[int], List[float], str]:
    """Samples one response: ids, their logprobs, and vLLM's finish_reason (``stop`` or ``length``)."""
    rng = np.random.default_rng(seed)
    ids: List[int] = []
    lps: List[float] = []
    context = list(prompt)
    while len(ids) < max_tokens:
        logp = log_softmax(table[state_of(context)] / temperature)
        a = int(rng.choice(len(ACTIONS), p=np.exp(logp)))
        token = ACTIONS[a]
        ids.append(token)
        lps.append(float(logp[a]))
        context.append(token)
        if token in stop:
            return ids, lps, "stop"
    return ids, lps, "length"


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client closing its keep-alive connection (raas at shutdown, a dropped call) is not an error.
        if not isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            super().handle_error(request, client_address)


class PolicyServer:
    """The HTTP server around one weight table (swapped whole on update)."""

    def __init__(self, table: np.ndarray, host: str = "127.0.0.1", port: int = 0, model: str = "digits-policy") -> None:
        self.table = table
        self.weight_version = "0"
        self.model = model
        self.requests = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive: raas reuses its connections

            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def _answer(self, status: int, body: Any) -> None:
                data = json.dumps(body).encode("utf-8")
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _body(self) -> Dict[str, Any]:
                n = int(self.headers.get("content-length") or 0)
                return json.loads(self.rfile.read(n) or b"{}") if n else {}

            def do_GET(self) -> None:
                if self.path == "/health":
                    return self._answer(200, {})
                if self.path == "/v1/models":
                    return self._answer(200, {"object": "list", "data": [
                        {"id": server.model, "object": "model", "owned_by": "raas-example", "max_model_len": 4096}]})
                if self.path == "/weight_info":
                    return self._answer(200, {"weight_version": server.weight_version})
                self._answer(404, {"detail": "Not Found"})

            def do_POST(self) -> None:
                try:
                    body = self._body()
                except ValueError as e:
                    return self._answer(400, {"error": {"message": f"body is not JSON: {e}", "type": "BadRequestError", "param": None, "code": 400}})
                if self.path == "/v1/completions":
                    return self._answer(*server.complete(body))
                if self.path == "/update_weights":
                    path = (body.get("update_info") or {}).get("path")
                    if not isinstance(path, str):
                        return self._answer(400, {"detail": "update_info.path: the .npy file of the new table"})
                    server.load(path, str(body.get("weight_version", int(server.weight_version) + 1 if server.weight_version.isdigit() else "")))
                    return self._answer(200, {"message": "Weights updated", "weight_version": server.weight_version})
                self._answer(404, {"detail": "Not Found"})

        self.httpd = _Server((host, port), Handler)
        self.url = f"http://{host}:{self.httpd.server_address[1]}"

    def load(self, path: str, weight_version: str) -> None:
        table = np.load(path)
        if table.shape != SHAPE:
            raise ValueError(f"{path}: expected a table of shape {SHAPE}, got {table.shape}")
        self.table = table  # one assignment: a request in progress keeps the table it started with
        self.weight_version = weight_version

    def complete(self, body: Dict[str, Any]) -> Tuple[int, Dict[str, Any]]:
        prompt = body.get("prompt")
        if not (isinstance(prompt, list) and all(isinstance(t, int) for t in prompt)):
            return 400, {"error": {"message": "prompt: this server takes token ids (list[int])", "type": "BadRequestError", "param": "prompt", "code": 400}}
        max_tokens = int(body.get("max_tokens") or 16)
        temperature = float(body.get("temperature") if body.get("temperature") is not None else 1.0)
        if temperature <= 0:
            return 400, {"error": {"message": "temperature: must be > 0 here (no greedy mode)", "type": "BadRequestError", "param": "temperature", "code": 400}}
        seed = body.get("seed")
        stop = set(body.get("stop_token_ids") or []) | {EOS}
        self.requests += 1
        ids, lps, finish = sample(self.table, prompt, max_tokens, int(seed) if seed is not None else int(time.time_ns() % 2**32), temperature, stop)
        tokens = [f"token_id:{t}" for t in ids]
        choice = {
            "index": 0, "text": "".join(str(t - 15) for t in ids if t != EOS),
            "logprobs": {"text_offset": [0] * len(ids), "token_logprobs": lps, "tokens": tokens,
                         "top_logprobs": [{tok: lp} for tok, lp in zip(tokens, lps)]},
            "finish_reason": finish, "stop_reason": None,
            "token_ids": ids if body.get("return_token_ids") else None, "prompt_logprobs": None,
            "prompt_token_ids": prompt if body.get("return_token_ids") else None,
        }
        return 200, {"id": f"cmpl-{body.get('request_id', self.requests)}", "object": "text_completion", "created": int(time.time()),
                     "model": self.model, "choices": [choice],
                     "usage": {"prompt_tokens": len(prompt), "completion_tokens": len(ids), "total_tokens": len(prompt) + len(ids)}}

    def serve_in_thread(self) -> threading.Thread:
        t = threading.Thread(target=self.httpd.serve_forever, name="policy-server", daemon=True)
        t.start()
        return t

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--weights", help=".npy table to start from (default: zeros, a uniform policy)")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    args = ap.parse_args()
    table = np.load(args.weights) if args.weights else np.zeros(SHAPE)
    server = PolicyServer(table, args.host, args.port)
    print(f"policy server listening on {server.url}", flush=True)
    try:
        server.httpd.serve_forever()
    except KeyboardInterrupt:
        pass
    server.httpd.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
