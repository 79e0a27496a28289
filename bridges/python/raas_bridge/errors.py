"""Errors raised by the bridge."""
from __future__ import annotations

from typing import Any, Optional


class RaasError(Exception):
    """An error answered by the sidecar (or found by the bridge), with a stable ``code``.

    Codes are the sidecar's (docs/sidecar.md): ``parse_error``, ``unknown_op``, ``bad_request``,
    ``not_ready``, ``line_too_long``, ``cancelled``, ``timeout``, ``config_invalid``, ``internal``, ...
    The bridge adds ``sidecar_exited`` (the process ended without answering), ``sidecar_timeout``
    (no answer within the client-side wait) and ``bad_batch`` (a batch that does not fit the schema).
    """

    def __init__(self, code: str, message: str, *, request_id: Any = None, op: Optional[str] = None) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.request_id = request_id
        self.op = op
