#!/usr/bin/env python3
"""An example runner service in Python, standard library only (README "Writing a runner", PROTOCOL.md).

Its one runner, `default`, checks the host's signature, reads its event (event.get) and the message
before it (history.page), counts turns in conversation state (state.get, state.set), streams its
reply as deltas then a completed message, records the reply in state (a state.updated result),
attaches a small inline artifact, answers the messages steered into its run (steering.pull), and
ends with run.completed. A cancel, an interrupt or the deadline closes its request: it stops there.

    RUNNER_SECRET=at-least-16-characters python3 examples/python-runner/runner.py [PORT]
"""
import base64
import hashlib
import hmac
import json
import os
import re
import select
import socket
import sys
import time
import urllib.error
import urllib.request
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SECRET = os.environ.get("RUNNER_SECRET", "").encode() or None
MAX_AGE_S = 300

MANIFEST = {
    "protocol": "agent-runner/v1",
    "author": "examples",
    "name": "python",
    "version": "1.0.0",
    "runners": [
        {
            "name": "default",
            "label": {"en_US": "Python example"},
            "description": {"en_US": "Answers each message with its turn number and the message before it."},
            "capabilities": {"streaming": True, "steering": True},
            "permissions": {"history": ["page"], "events": ["get"]},
            "config_schema": [
                # A runner that thinks: messages sent meanwhile are steered into its run.
                {"name": "turn_delay_ms", "type": "integer", "label": "Delay before each answer (ms)", "default": 0}
            ],
        }
    ],
}


def log(*parts):
    print(*parts, file=sys.stderr, flush=True)


class Stopped(Exception):
    """The host closed the request (cancel, interrupt, deadline) or ended the run: nothing more is read."""


class HostApiError(Exception):
    def __init__(self, status, error):
        super().__init__(f"{error.get('code')}: {error.get('message')}")
        self.status, self.code = status, error.get("code", "runtime_error")


def signature_problem(headers, body):
    """Why the request is not the host's, or None. The HMAC covers the raw body bytes, never a re-serialised one."""
    ts, sig = headers.get("X-Agent-Timestamp", ""), headers.get("X-Agent-Signature", "")
    if not ts.isdigit() or abs(time.time() - int(ts)) > MAX_AGE_S:
        return "missing or stale X-Agent-Timestamp"
    want = "v1=" + hmac.new(SECRET, ts.encode() + b"." + body, hashlib.sha256).hexdigest()
    return None if hmac.compare_digest(want, sig) else "bad X-Agent-Signature"


def text_of(inp):
    return inp.get("text") or "".join(e.get("text", "") for e in inp.get("contents") or [] if e.get("type") == "text")


class Run:
    def __init__(self, handler, ctx):
        self.handler, self.ctx, self.run_id = handler, ctx, ctx["run_id"]
        api = ctx["runtime"]["api"]
        self.api_url, self.token = f"{api['base_url']}/v1/runs/{self.run_id}/api", api["token"]
        # Context times are UTC ISO 8601 ending in "Z", which fromisoformat takes only from Python 3.11.
        self.deadline = datetime.fromisoformat(ctx["runtime"]["deadline_at"].replace("Z", "+00:00")).timestamp()
        self.sequence = 0

    def closed(self):
        """The host closes the connection to stop a run; peek for that end of file without writing."""
        conn = self.handler.connection
        if not select.select([conn], [], [], 0)[0]:
            return False
        try:
            return conn.recv(1, socket.MSG_PEEK) == b""
        except OSError:
            return True

    def wait(self, seconds):
        end = min(time.time() + seconds, self.deadline)
        while time.time() < end:
            if self.closed():
                raise Stopped()
            time.sleep(0.05)

    def emit(self, type_, data):
        self.sequence += 1
        line = {"run_id": self.run_id, "type": type_, "data": data, "sequence": self.sequence}
        try:
            self.handler.wfile.write(json.dumps(line).encode() + b"\n")
            self.handler.wfile.flush()
        except OSError as err:
            raise Stopped() from err

    def api(self, action, params):
        req = urllib.request.Request(
            self.api_url,
            data=json.dumps({"action": action, "params": params}).encode(),
            headers={"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(req, timeout=max(1.0, self.deadline - time.time())) as res:
                return json.load(res)["data"]
        except urllib.error.HTTPError as err:
            if err.code == 401:  # the run has ended: its token died with it
                raise Stopped() from err
            try:
                error = json.load(err)["error"]
            except (ValueError, KeyError, TypeError):
                error = {"code": "runtime_error", "message": f"HTTP {err.code}"}
            raise HostApiError(err.code, error) from err
        except OSError as err:  # the host could not be reached
            raise HostApiError(503, {"code": "unreachable", "message": str(err)}) from err

    def answer(self, text, turn, previous):
        reply = f'Turn {turn}: you said "{text}"' + (f', and before that "{previous}"' if previous else "")
        for word in re.findall(r"\S+\s*", reply):
            self.emit("message.delta", {"chunk": {"role": "assistant", "content": word}})
        self.emit("message.completed", {"message": {"role": "assistant", "content": reply}})
        return reply

    def go(self):
        ctx, apis = self.ctx, self.ctx["context"]["available_apis"]
        event = self.api("event.get", {"event_id": ctx["event"]["event_id"]}) if apis["event_get"] else None
        previous = None
        if apis["history_page"] and ctx["context"].get("latest_cursor"):
            page = self.api("history.page", {"before_cursor": ctx["context"]["latest_cursor"], "limit": 20})
            previous = next((i.get("content") for i in page["items"] if i["role"] == "user"), None)
        stateful = apis["state"] and "conversation" in ctx["runtime"]["metadata"].get("state_scopes", [])
        turn = (self.api("state.get", {"scope": "conversation", "key": "turns"})["value"] or 0) + 1 if stateful else 1
        delay = int(ctx["config"].get("turn_delay_ms") or 0) / 1000
        text, answered = text_of(ctx["input"]), 0
        while True:
            if stateful:
                self.api("state.set", {"scope": "conversation", "key": "turns", "value": turn})
            self.wait(delay)
            reply = self.answer(text, turn, previous)
            answered += 1
            if stateful:
                self.emit("state.updated", {"scope": "conversation", "key": "last_reply", "value": reply})
            # Pull at each turn boundary, and so once more before run.completed: a message claimed after the
            # last pull would never be answered.
            items = self.api("steering.pull", {"mode": "one-at-a-time"})["items"] if apis["steering_pull"] else []
            if not items:
                break
            previous, text, turn = text, text_of(items[0]["input"]), turn + 1
        about = f"{event['event_type']} of {event['event_time']}" if event else ctx["event"]["event_type"]
        note = f"{about}: {answered} answer(s)\n".encode()
        self.emit(
            "artifact.created",
            {"artifact_type": "file", "name": "note.txt", "mime_type": "text/plain",
             "content_base64": base64.b64encode(note).decode(), "size_bytes": len(note)},
        )
        self.emit("run.completed", {"finish_reason": "stop"})


class Handler(BaseHTTPRequestHandler):
    # HTTP/1.0: the result stream ends when the connection closes, with no framing to write.
    protocol_version = "HTTP/1.0"

    def log_message(self, fmt, *args):
        pass

    def send_json(self, status, body):
        raw = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def refuse(self, status, code, message):
        # The run fails runner.http_error quoting the start of this body (GET /v1/runs/{id}); logged here too.
        log(f"refused {self.path}: {message}")
        self.send_json(status, {"error": {"code": code, "message": message}})

    def do_GET(self):
        if self.path != "/manifest":
            return self.refuse(404, "not_found", "no such route")
        self.send_json(200, MANIFEST)

    def do_POST(self):
        if self.path != "/runners/default/run":
            return self.refuse(404, "not_found", "no such runner")
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        problem = SECRET and signature_problem(self.headers, body)
        if problem:
            return self.refuse(401, "unauthorized", problem)
        try:
            run = Run(self, json.loads(body)["context"])
        except (ValueError, KeyError, TypeError) as err:
            return self.refuse(400, "invalid_request", f"not an AgentRunRequest: {err}")
        self.send_response(200)
        self.send_header("Content-Type", "application/x-ndjson")
        self.end_headers()
        try:
            run.go()
        except Stopped:
            log(f"run {run.run_id}: the host closed the request; stopped")
        except HostApiError as err:
            try:
                run.emit("run.failed", {"code": f"host_api.{err.code}", "error": str(err), "retryable": err.status >= 500})
            except Stopped:
                pass


if __name__ == "__main__":
    port = int(sys.argv[1]) if len(sys.argv) > 1 else int(os.environ.get("RUNNER_PORT", "9000"))
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    print(f"python runner listening on http://127.0.0.1:{server.server_address[1]}", flush=True)
    server.serve_forever()
