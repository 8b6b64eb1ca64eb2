"""The exporting process: ``python -m rag_contract.observability.export_child READ_FD WRITE_FD``,
started by ``export_process.ExportProcess`` and talking to it over those two pipe ends only.

It reads an ``ExportConfig``, then batches of packed records, and exports each batch as it comes
(``otel.otlp_batches``: spans, redaction and encoding in ``otlp_wire``, the OTLP/HTTP post). Each
failure goes back by exception type (``FAILED``), as does each flush answer once everything before
it is exported. At the end of its input (the serving process closed it, or died) it shuts the
exporter down and exits. Ctrl-C in a terminal reaches it too and is ignored: the serving process
decides when it stops, after handing over what is queued.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Sequence
from multiprocessing.connection import Connection

from rag_contract.observability.export_process import BATCH, CONFIG, FAILED, FLUSH, FLUSHED, ExportConfig, unpack
from rag_contract.observability.otel import otlp_batches


def serve(inbox: Connection, outbox: Connection) -> None:
    """Export what ``inbox`` brings until it ends; report to ``outbox``."""
    tag, config = inbox.recv()
    if tag != CONFIG or not isinstance(config, ExportConfig):
        raise ValueError("the first message must be the export configuration")

    def failed(error_type: str, detail: str) -> None:
        outbox.send((FAILED, error_type, detail))

    export = otlp_batches(config.endpoint, config.include_text, config.timeout_s, failed, config.salt)
    try:
        while True:
            try:
                message = inbox.recv()
            except EOFError:
                return
            if message[0] == BATCH:
                try:
                    export([unpack(p) for p in message[1]])
                except Exception as exc:  # noqa: BLE001 - one bad batch is reported, not the end of exporting
                    failed(type(exc).__name__, str(exc)[:200])
            elif message[0] == FLUSH:
                outbox.send((FLUSHED, message[1]))
    finally:
        export.close()


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 2 or not all(a.isdigit() for a in args):
        print("usage: python -m rag_contract.observability.export_child READ_FD WRITE_FD", file=sys.stderr)
        return 2
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    inbox = Connection(int(args[0]), writable=False)
    outbox = Connection(int(args[1]), readable=False)
    try:
        serve(inbox, outbox)
    except (BrokenPipeError, EOFError):
        return 0  # the serving process is gone: nobody to export for
    return 0


if __name__ == "__main__":
    sys.exit(main())
