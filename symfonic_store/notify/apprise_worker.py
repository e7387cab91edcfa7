"""The child process an :class:`~symfonic_store.notify.channels.apprise.AppriseSender` sends
through (SPEC §14).

Apprise blocks, and its plugins' timeouts bound each read, not a whole notification; a
thread cannot be stopped. A process can: the sender kills this one when a notification
outlasts its deadline, which closes its connections, and starts another for the next.

Protocol, one JSON object a line: the first line on stdin is ``{"urls": [...]}`` (never
on the command line: the URLs carry secrets); then each ``{"title", "body"}`` line is
answered on stdout with ``{"ok": bool}`` or ``{"ok": false, "error": <exception type>}``.
Whatever a plugin prints goes to stderr, never into the answers. SIGTERM and SIGINT are
ignored (the notifier finishes its message in flight, then closes the input: the end of
the input ends the worker); the sender kills it with SIGKILL at a deadline.
"""

from __future__ import annotations

import json
import os
import signal
import sys


def main() -> None:
    # A SIGTERM to the whole group (systemd's stop) must not cut the message in flight:
    # the notifier finishes it, then closes this worker's input, which ends it.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    answers = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)  # a plugin's print cannot corrupt an answer
    import apprise

    urls = json.loads(sys.stdin.readline())["urls"]
    notifier = apprise.Apprise()
    for url in urls:
        notifier.add(url)
    for line in sys.stdin:
        job = json.loads(line)
        try:
            answer: dict[str, object] = {"ok": bool(notifier.notify(body=job["body"], title=job["title"]))}
        except Exception as exc:  # a plugin's own failure, shown by its type only
            answer = {"ok": False, "error": type(exc).__name__}
        answers.write(json.dumps(answer) + "\n")
        answers.flush()


if __name__ == "__main__":
    main()
