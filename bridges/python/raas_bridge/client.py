"""RaasSidecar: drives ``raas sidecar`` (JSON lines on stdin/stdout) from a Python trainer."""
from __future__ import annotations

import collections
import contextlib
import itertools
import json
import os
import shutil
import subprocess
import sys
import threading
import queue
from typing import Any, Callable, Deque, Dict, Iterator, List, Optional, Sequence, Union

from .batch import Batch
from .errors import RaasError

_EOF = object()
Backend = Union[str, Dict[str, str]]


def default_command(config_path: str) -> List[str]:
    """``node <repo>/dist/src/cli.js sidecar --config <path>``; ``$RAAS_CLI`` names another cli.js,
    and an installed ``raas`` on PATH is used when the repository's build is not there."""
    cli = os.environ.get("RAAS_CLI")
    if not cli:
        here = os.path.dirname(os.path.abspath(__file__))
        cli = os.path.normpath(os.path.join(here, "..", "..", "..", "dist", "src", "cli.js"))
        if not os.path.exists(cli) and shutil.which("raas"):
            return ["raas", "sidecar", "--config", config_path]
    return [os.environ.get("RAAS_NODE", "node"), cli, "sidecar", "--config", config_path]


class RaasSidecar:
    """A running ``raas sidecar`` process and its protocol, as a context manager::

        with RaasSidecar("configs/demo.yaml") as rs:
            batch = rs.next_batch()
            rs.update_weights()

    The process starts at construction and the handshake (``hello``) runs at once, so a bad config
    raises here (RaasError ``config_invalid``). Calls are synchronous and thread-safe (one request at
    a time). Events (``step_progress``, ``warning``) go to ``on_event`` (called in the calling thread
    while it waits) and are kept in ``events`` (the last 1000). The sidecar's stderr (its logs) is
    copied to ``log_stream`` (default ``sys.stderr``; None drops it); its tail is kept for errors.
    """

    def __init__(
        self,
        config_path: Optional[str] = None,
        *,
        command: Optional[Sequence[str]] = None,
        args: Sequence[str] = (),
        cwd: Optional[str] = None,
        env: Optional[Dict[str, str]] = None,
        on_event: Optional[Callable[[Dict[str, Any]], None]] = None,
        log_stream: Any = sys.stderr,
        request_timeout_s: Optional[float] = None,
        handshake: bool = True,
    ) -> None:
        if command is None:
            if config_path is None:
                raise RaasError("bad_request", "RaasSidecar: give config_path (or a full command)")
            command = default_command(config_path)
        self.command = list(command) + list(args)
        self.on_event = on_event
        self.request_timeout_s = request_timeout_s
        self.events: Deque[Dict[str, Any]] = collections.deque(maxlen=1000)
        self.info: Dict[str, Any] = {}
        self._ids = itertools.count(1)
        self._lock = threading.Lock()  # one request/answer cycle at a time
        self._wlock = threading.Lock()  # whole lines on stdin (close() may write while a request waits)
        self._inbox: "queue.Queue[Any]" = queue.Queue()
        self._stderr_tail: Deque[str] = collections.deque(maxlen=40)
        self._fatal: Optional[Dict[str, Any]] = None
        self._closed = False
        self._log_stream = log_stream
        try:
            self._proc = subprocess.Popen(
                self.command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                cwd=cwd, env=None if env is None else {**os.environ, **env},
            )
        except OSError as e:
            raise RaasError("sidecar_exited", f"cannot start {self.command[0]!r}: {e}; is node on PATH and the project built (npm run build)?") from e
        self._reader = threading.Thread(target=self._read_stdout, name="raas-sidecar-stdout", daemon=True)
        self._reader.start()
        self._err_reader = threading.Thread(target=self._read_stderr, name="raas-sidecar-stderr", daemon=True)
        self._err_reader.start()
        if handshake:
            try:
                self.info = self.hello()
            except BaseException:
                self.close()
                raise

    # -- context manager -------------------------------------------------------------------
    def __enter__(self) -> "RaasSidecar":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    @property
    def pid(self) -> int:
        """The sidecar's process id."""
        return self._proc.pid

    # -- ops --------------------------------------------------------------------------------
    def hello(self, client: str = "raas_bridge") -> Dict[str, Any]:
        """Protocol and raas versions, ops, capabilities, the config's batch_size and group_size."""
        return self.request("hello", client=client)

    def next_batch(self, timeout_s: Optional[float] = None, *, raw: bool = False) -> Union[Batch, Dict[str, Any]]:
        """The next step's batch (a Batch; the answered dict with ``raw=True``). ``timeout_s`` bounds
        the sidecar's wait (RaasError ``timeout``); without it, it waits as long as the step takes."""
        params: Dict[str, Any] = {} if timeout_s is None else {"timeout_s": timeout_s}
        wait = None if timeout_s is None else timeout_s + 30.0
        result = self.request("next_batch", _wait_s=wait, **params)
        return result if raw else Batch.from_dict(result)

    def batches(self, steps: Optional[int] = None, timeout_s: Optional[float] = None) -> Iterator[Batch]:
        """Yields ``steps`` batches (without end when None), stopping early when the dataset is
        exhausted; call update_weights() between them, as with the Node API's ``batches()``."""
        served = 0
        while steps is None or served < steps:
            try:
                batch = self.next_batch(timeout_s)
            except RaasError as e:
                if e.code == "dataset_exhausted":
                    return
                raise
            served += 1
            yield batch  # type: ignore[misc]

    def update_weights(self, version: Optional[int] = None, weight_version: Optional[str] = None,
                       backends: Optional[List[Backend]] = None) -> Dict[str, Any]:
        """Announces new weights: ``{"policy_version": n}``. ``version`` defaults to the current one
        plus one; ``weight_version`` to ``str(version)``; ``backends`` replaces the LLM servers."""
        params: Dict[str, Any] = {}
        if version is not None:
            params["version"] = version
        if weight_version is not None:
            params["weight_version"] = weight_version
        if backends is not None:
            params["backends"] = backends
        return self.request("update_weights", **params)

    def pause_generation(self, mode: str = "drain", abort_grace_s: Optional[float] = None) -> Dict[str, Any]:
        """Co-located trainers: stops admission and every model call; returns once none is in flight,
        so the inference engines may sleep. ``mode="drain"`` lets calls in flight finish,
        ``"abort"`` has the backends cut them (their turns continue after resume_generation())."""
        params: Dict[str, Any] = {"mode": mode}
        if abort_grace_s is not None:
            params["abort_grace_s"] = abort_grace_s
        return self.request("pause_generation", **params)

    def resume_generation(self) -> Dict[str, Any]:
        """Ends a pause: held jobs go on and admission resumes."""
        return self.request("resume_generation")

    @contextlib.contextmanager
    def paused(self, mode: str = "drain", abort_grace_s: Optional[float] = None) -> Iterator[Dict[str, Any]]:
        """``with rs.paused("abort"): train; sync weights; rs.update_weights()``: pauses generation
        for the block and resumes it after (also when the block raises)."""
        report = self.pause_generation(mode, abort_grace_s)
        try:
            yield report
        finally:
            self.resume_generation()

    def status(self) -> Dict[str, Any]:
        """``{"state": "idle" | "starting"}``, or ``{"state": "running", "coordinator": {...}}``."""
        return self.request("status")

    def checkpoint(self) -> Dict[str, Any]:
        """The coordinator's JSON state (save it with your model checkpoint; give it to resume())."""
        return self.request("checkpoint")["state"]

    def resume(self, state: Dict[str, Any]) -> Dict[str, Any]:
        """Replaces the coordinator by one restored from a checkpoint() state."""
        return self.request("resume", state=state)

    def eval(self, dataset: Optional[Dict[str, Any]] = None, n: Optional[int] = None, output: Optional[str] = None) -> Dict[str, Any]:
        """One evaluation pass (as ``raas eval``); arguments override the config's ``eval`` section."""
        params: Dict[str, Any] = {}
        if dataset is not None:
            params["dataset"] = dataset
        if n is not None:
            params["n"] = n
        if output is not None:
            params["output"] = output
        return self.request("eval", **params)

    def close(self, timeout_s: float = 60.0, cancel: Optional[bool] = None) -> int:
        """Sends ``shutdown``, waits for the process to exit (kills it after ``timeout_s``) and
        returns its exit code. Safe to call twice. ``cancel``: whether the jobs in flight are
        cancelled; default (None): kept once checkpoint() or resume() was called (a resume
        re-attaches to them), else cancelled."""
        if self._closed:
            return self._proc.wait()
        self._closed = True
        if self._proc.poll() is None:
            # Not under the request lock: a next_batch waiting in another thread is answered
            # `cancelled` by the shutdown instead of holding the close up.
            try:
                shutdown: Dict[str, Any] = {"id": next(self._ids), "op": "shutdown"}
                if cancel is not None:
                    shutdown["cancel"] = cancel
                self._send(shutdown)
            except RaasError:
                pass
            try:
                with self._wlock:
                    self._proc.stdin.close()  # type: ignore[union-attr]
            except (OSError, ValueError):
                pass
        try:
            code = self._proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            code = self._proc.wait()
        self._reader.join(timeout=5)
        self._err_reader.join(timeout=5)
        for stream in (self._proc.stdout, self._proc.stderr, self._proc.stdin):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass
        return code

    # -- protocol ---------------------------------------------------------------------------
    def request(self, op: str, _wait_s: Optional[float] = None, **params: Any) -> Any:
        """Sends one request and returns its ``result``; raises RaasError with the answered code."""
        with self._lock:
            if self._closed:
                raise RaasError("not_ready", f"{op}: the sidecar was closed", op=op)
            rid = next(self._ids)
            self._send({"id": rid, "op": op, **params})
            wait = _wait_s if _wait_s is not None else self.request_timeout_s
            while True:
                try:
                    msg = self._inbox.get(timeout=wait)
                except queue.Empty:
                    raise RaasError("sidecar_timeout", f"{op}: no answer within {wait} s", request_id=rid, op=op) from None
                if msg is _EOF:
                    self._inbox.put(_EOF)  # later calls see it too
                    raise self._exited(op, rid)
                if "event" in msg:
                    self._event(msg)
                    continue
                if msg.get("id") != rid:
                    # an answer to a line we could not frame (id null) or an earlier abandoned wait
                    if msg.get("ok") is False and msg.get("id") is None:
                        err = msg.get("error", {})
                        raise RaasError(err.get("code", "internal"), err.get("message", ""), request_id=rid, op=op)
                    continue
                if msg.get("ok"):
                    return msg.get("result")
                err = msg.get("error") or {}
                raise RaasError(err.get("code", "internal"), err.get("message", ""), request_id=rid, op=op)

    def _send(self, obj: Dict[str, Any]) -> None:
        line = json.dumps(obj, separators=(",", ":"), allow_nan=False) + "\n"
        try:
            with self._wlock:
                self._proc.stdin.write(line.encode("utf-8"))  # type: ignore[union-attr]
                self._proc.stdin.flush()  # type: ignore[union-attr]
        except (BrokenPipeError, ValueError, OSError) as e:
            raise self._exited(obj.get("op", "?"), obj.get("id")) from e

    def _event(self, msg: Dict[str, Any]) -> None:
        self.events.append(msg)
        if self.on_event is not None:
            self.on_event(msg)

    def _exited(self, op: str, rid: Any) -> RaasError:
        if self._fatal is not None:
            return RaasError(self._fatal.get("code", "internal"), self._fatal.get("message", ""), request_id=rid, op=op)
        try:
            code = self._proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            code = None
        tail = "".join(self._stderr_tail).strip()
        return RaasError("sidecar_exited", f"{op}: the sidecar exited (code {code}) without answering" + (f"; its stderr ends with:\n{tail}" if tail else ""), request_id=rid, op=op)

    def _read_stdout(self) -> None:
        assert self._proc.stdout is not None
        for raw in self._proc.stdout:
            try:
                msg = json.loads(raw)
            except ValueError:
                self._stderr_tail.append(f"[non-protocol stdout line] {raw[:200]!r}\n")
                continue
            if isinstance(msg, dict) and msg.get("event") == "fatal":
                self._fatal = msg.get("data") or {}
            if isinstance(msg, dict):
                self._inbox.put(msg)
        self._inbox.put(_EOF)

    def _read_stderr(self) -> None:
        assert self._proc.stderr is not None
        for raw in self._proc.stderr:
            text = raw.decode("utf-8", "replace")
            self._stderr_tail.append(text)
            if self._log_stream is not None:
                try:
                    self._log_stream.write(text)
                except (OSError, ValueError):
                    pass
