"""The fake Messages API server itself: queue, handler, errors, clean shutdown."""

from __future__ import annotations

import http.client
import json
import threading
from typing import Any

from fake_messages_api import FakeMessagesAPI, Recorded, Reply, error_reply, text_message


def post(url: str, path: str, body: Any) -> tuple[int, dict[str, str], bytes]:
    host, port = url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=5)
    try:
        conn.request("POST", path, body=json.dumps(body), headers={"x-test": "1"})
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


def test_queue_then_handler_then_empty_error() -> None:
    seen: list[Recorded] = []

    def handler(req: Recorded) -> dict[str, Any]:
        seen.append(req)
        return text_message("from handler")

    with FakeMessagesAPI([text_message("queued")], handler=handler) as api:
        status, _, data = post(api.url, "/v1/messages", {"n": 1})
        assert status == 200
        assert json.loads(data)["content"][0]["text"] == "queued"
        status, _, data = post(api.url, "/v1/messages", {"n": 2})
        assert json.loads(data)["content"][0]["text"] == "from handler"
        assert [r.body["n"] for r in seen] == [2]
        api.handler = None
        status, _, data = post(api.url, "/v1/messages", {"n": 3})
        assert status == 500
        assert "no scripted reply left" in json.loads(data)["error"]["message"]
        recorded = api.requests
    assert [r.body["n"] for r in recorded] == [1, 2, 3]
    assert recorded[0].headers["x-test"] == "1"
    assert recorded[0].received_at <= recorded[1].received_at


def test_status_headers_raw_body_and_unknown_path() -> None:
    with FakeMessagesAPI(
        [
            error_reply(429, "rate_limit_error", "slow", headers={"retry-after": "7"}),
            Reply(body=b"not json", status=200),
        ]
    ) as api:
        status, headers, data = post(api.url, "/v1/messages", {})
        assert status == 429
        assert headers["retry-after"] == "7"
        assert headers["request-id"].startswith("req_fake_")
        assert json.loads(data)["error"]["type"] == "rate_limit_error"
        status, _, data = post(api.url, "/v1/messages", {})
        assert (status, data) == (200, b"not json")
        status, _, _ = post(api.url, "/v1/other", {})
        assert status == 404
        assert len(api.requests) == 3


def test_handler_exception_is_a_500_naming_it() -> None:
    def broken(req: Recorded) -> dict[str, Any]:
        raise RuntimeError("handler bug")

    with FakeMessagesAPI(handler=broken) as api:
        status, _, data = post(api.url, "/v1/messages", {})
    assert status == 500
    assert "handler bug" in json.loads(data)["error"]["message"]


def test_stop_cuts_delays_short_and_leaves_no_threads() -> None:
    arrived = threading.Event()

    def slow(req: Recorded) -> Reply:
        arrived.set()
        return Reply(body=text_message("late"), delay=60)

    api = FakeMessagesAPI(handler=slow).start()
    errors: list[BaseException] = []

    def call() -> None:
        try:
            post(api.url, "/v1/messages", {})
        except BaseException as exc:
            errors.append(exc)

    client = threading.Thread(target=call)
    client.start()
    assert arrived.wait(60)  # the server has the request in hand: stop it
    api.stop()
    client.join(timeout=20)  # a cut delay returns at once; uncut, it would wait 60 s
    assert not client.is_alive()
    assert errors  # the connection was closed without a response
    api.stop()  # idempotent
    assert not any(t.name == "fake-messages-api" for t in threading.enumerate())
