"""The official Svix Python SDK, unchanged, against a running vow.

Run by scripts/sdk-compat.sh with VOW_URL and VOW_TOKEN set. Prints one line per step and exits
non-zero on the first failure (an assert, or an SDK exception when vow's answer does not parse).
ed25519 (`v1a`) signatures are checked with `cryptography`, independent of vow's ed25519 code.
"""

import base64
import http.server
import json
import os
import sys
import threading
import time
import uuid

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from svix.api import (
    AppPortalAccessIn,
    ApplicationIn,
    EndpointIn,
    EndpointPatch,
    EndpointSecretRotateIn,
    EndpointUpsertIn,
    EventExampleIn,
    EventTypeIn,
    EventTypeListOptions,
    MessageAttemptListAttemptedMessagesOptions,
    MessageAttemptListByEndpointOptions,
    MessageAttemptListByMsgOptions,
    MessageGetOptions,
    MessageIn,
    MessageListOptions,
    StatusCodeClass,
    Svix,
    SvixOptions,
)
from svix.exceptions import HttpError, HTTPValidationError
from svix.webhooks import Webhook


def step(msg: str) -> None:
    print(f"ok  {msg}", flush=True)


# Endpoints point at the discard port on loopback (or at the receiver below): vow's delivery
# workers never send anything off this machine.
HOOK = "http://127.0.0.1:9/sdk-hook"


class Receiver(http.server.BaseHTTPRequestHandler):
    """Records every POST (lower-cased headers, raw body) and answers 204; those to
    `/ed25519` apart."""

    received: list = []
    ed25519: list = []

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        body = self.rfile.read(int(self.headers["content-length"]))
        into = Receiver.ed25519 if self.path == "/ed25519" else Receiver.received
        into.append(({k.lower(): v for k, v in self.headers.items()}, body))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args) -> None:  # quiet
        pass


def start_receiver() -> str:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}/hook"


def new_whsk() -> tuple[str, Ed25519PublicKey]:
    """A fresh ed25519 key in Svix's `whsk_` layout (base64 of seed and public key), and its
    public key."""
    private = Ed25519PrivateKey.generate()
    seed = private.private_bytes_raw()
    public = private.public_key()
    raw_public = public.public_bytes(Encoding.Raw, PublicFormat.Raw)
    return "whsk_" + base64.b64encode(seed + raw_public).decode(), public


def v1a_verifying(headers: dict, body: bytes, public: Ed25519PublicKey) -> int:
    """How many `v1a` entries of webhook-signature verify with `public` over id.timestamp.body."""
    content = f"{headers['webhook-id']}.{headers['webhook-timestamp']}.".encode() + body
    good = 0
    for entry in headers["webhook-signature"].split(" "):
        version, _, sig = entry.partition(",")
        if version != "v1a":
            continue
        try:
            public.verify(base64.b64decode(sig), content)
            good += 1
        except InvalidSignature:
            pass
    return good


def wait_for(what: str, ready, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def main() -> None:
    url = os.environ["VOW_URL"]
    token = os.environ["VOW_TOKEN"]
    # No retries: a 5xx from vow should fail the run, not be papered over.
    svix = Svix(token, SvixOptions(server_url=url, retry_schedule=[]))
    run = uuid.uuid4().hex[:8]

    # -- applications -------------------------------------------------------------------------
    app_uid = f"sdk-app-{run}"
    app = svix.application.create(
        ApplicationIn(name="SDK app", uid=app_uid, metadata={"suite": "sdk"})
    )
    assert app.id.startswith("app_"), app.id
    assert app.uid == app_uid and app.name == "SDK app", app
    assert app.metadata == {"suite": "sdk"}, app.metadata
    step(f"application.create -> {app.id}")

    got = svix.application.get(app.id)
    assert got.id == app.id and got.name == "SDK app", got
    step("application.get by id")

    by_uid = svix.application.get(app_uid)
    assert by_uid.id == app.id, by_uid
    step("application.get by uid")

    same = svix.application.get_or_create(ApplicationIn(name="ignored", uid=app_uid))
    assert same.id == app.id and same.name == "SDK app", same
    step("application.get_or_create returns the existing one")

    apps = svix.application.list()
    assert any(a.id == app.id for a in apps.data), apps
    step(f"application.list ({len(apps.data)} apps)")

    # -- event types --------------------------------------------------------------------------
    et_name = f"sdk.test_{run}.created"
    et = svix.event_type.create(
        EventTypeIn(
            name=et_name,
            description="Made by the SDK test",
            schemas={"1": {"type": "object"}},
        )
    )
    assert et.name == et_name and et.description == "Made by the SDK test", et
    assert et.deprecated is False, et
    step(f"event_type.create -> {et.name}")

    et_got = svix.event_type.get(et_name)
    assert et_got.name == et_name and et_got.schemas == {"1": {"type": "object"}}, et_got
    step("event_type.get")

    ets = svix.event_type.list(EventTypeListOptions(limit=250, with_content=True))
    listed = [e for e in ets.data if e.name == et_name]
    assert len(listed) == 1 and listed[0].schemas == {"1": {"type": "object"}}, ets
    step(f"event_type.list ({len(ets.data)} event types)")

    # -- endpoints ----------------------------------------------------------------------------
    ep = svix.endpoint.create(
        app.id,
        EndpointIn(
            url=HOOK,
            uid=f"sdk-ep-{run}",
            description="SDK endpoint",
            event_types=[et_name],
            channels=["project_1"],
            metadata={"k": "v"},
        ),
    )
    assert ep.id.startswith("ep_"), ep.id
    assert ep.event_types == [et_name] and ep.channels == ["project_1"], ep
    assert ep.url == HOOK, ep
    step(f"endpoint.create -> {ep.id}")

    ep_got = svix.endpoint.get(app.id, ep.id)
    assert ep_got.id == ep.id and ep_got.description == "SDK endpoint", ep_got
    assert svix.endpoint.get(app_uid, f"sdk-ep-{run}").id == ep.id
    step("endpoint.get by id and by uid")

    secret = svix.endpoint.get_secret(app.id, ep.id)
    assert secret.key.startswith("whsec_"), "secret is not whsec_"
    step("endpoint.get_secret is whsec_…")

    updated = svix.endpoint.upsert(
        app.id,
        ep.id,
        EndpointUpsertIn(
            url=f"{HOOK}-2",
            description="SDK endpoint, updated",
            event_types=[et_name],
            channels=["project_1", "project_2"],
        ),
    )
    assert updated.id == ep.id and updated.url == f"{HOOK}-2", updated
    assert updated.channels == ["project_1", "project_2"], updated
    step("endpoint.upsert (update)")

    patched = svix.endpoint.patch(app.id, ep.id, EndpointPatch(description="patched"))
    assert patched.description == "patched" and patched.url == updated.url, patched
    step("endpoint.patch")

    eps = svix.endpoint.list(app.id)
    assert [e.id for e in eps.data] == [ep.id], eps
    step("endpoint.list")

    svix.endpoint.rotate_secret(app.id, ep.id, EndpointSecretRotateIn())
    rotated = svix.endpoint.get_secret(app.id, ep.id)
    assert rotated.key.startswith("whsec_") and rotated.key != secret.key, "not rotated"
    step("endpoint.rotate_secret gives a new key")

    # -- messages -----------------------------------------------------------------------------
    event_id = f"sdk-evt-{run}"
    payload = {"user": "ada", "n": 1, "nested": {"ok": True}}
    msg = svix.message.create(
        app.id,
        MessageIn(
            event_type=et_name,
            event_id=event_id,
            payload=payload,
            channels=["project_1"],
        ),
    )
    assert msg.id.startswith("msg_") and msg.event_id == event_id, msg
    assert msg.event_type == et_name, msg
    step(f"message.create -> {msg.id}")

    m_id = svix.message.get(app.id, msg.id, MessageGetOptions(with_content=True))
    assert m_id.id == msg.id and m_id.payload == payload, m_id
    step("message.get by id")

    m_evt = svix.message.get(app.id, event_id, MessageGetOptions(with_content=True))
    assert m_evt.id == msg.id and m_evt.payload == payload, m_evt
    step("message.get by eventId")

    other = svix.message.create(app.id, MessageIn(event_type="sdk.other", payload={"n": 2}))
    msgs = svix.message.list(app.id)
    assert [m.id for m in msgs.data] == [other.id, msg.id], msgs
    filtered = svix.message.list(
        app.id, MessageListOptions(event_types=[et_name, "sdk.unused"], with_content=True)
    )
    assert [m.id for m in filtered.data] == [msg.id], filtered
    assert filtered.data[0].payload == payload, filtered
    on_channel = svix.message.list(app.id, MessageListOptions(channel="project_1"))
    assert [m.id for m in on_channel.data] == [msg.id], on_channel
    step("message.list (newest first, by event_types, by channel)")

    try:
        svix.message.create(
            app.id, MessageIn(event_type=et_name, event_id=event_id, payload={"again": True})
        )
        raise AssertionError("a repeated eventId was accepted")
    except HttpError as e:
        assert e.status_code == 409, e.status_code
        assert e.code == "conflict", e.code
    assert len(svix.message.list(app.id).data) == 2
    step("message.create with a repeated eventId raises HttpError 409")

    # -- deliveries ---------------------------------------------------------------------------
    # The discard port is refused by the egress guard, so the delivery may be anything but sent.
    dests = svix.message_attempt.list_attempted_destinations(app.id, msg.id)
    assert [d.id for d in dests.data] == [ep.id], dests
    assert dests.data[0].status_text in ("pending", "sending", "fail"), dests
    step("message_attempt.list_attempted_destinations")

    sent = svix.message_attempt.list_attempted_messages(
        app.id, ep.id, MessageAttemptListAttemptedMessagesOptions(with_content=True)
    )
    assert [m.id for m in sent.data] == [msg.id] and sent.data[0].payload == payload, sent
    step("message_attempt.list_attempted_messages")

    example = svix.endpoint.send_example(app.id, ep.id, EventExampleIn(event_type=et_name))
    assert example.event_type == et_name and example.id != msg.id, example
    sent = svix.message_attempt.list_attempted_messages(app.id, ep.id)
    assert [m.id for m in sent.data] == [example.id, msg.id], sent
    assert len(svix.message.list(app.id).data) == 3
    step("endpoint.send_example")

    # -- a real delivery, checked by the SDK's own verifier ----------------------------------
    hook = start_receiver()
    live = svix.endpoint.create(app.id, EndpointIn(url=hook, uid=f"sdk-live-{run}"))
    live_secret = svix.endpoint.get_secret(app.id, live.id).key
    raw = {"deliver": "me", "n": 1.5, "text": "caf\u00e9"}
    sent_msg = svix.message.create(app.id, MessageIn(event_type=et_name, payload=raw))
    wait_for("the delivery", lambda: len(Receiver.received) >= 1)
    headers, body = Receiver.received[0]
    Webhook(live_secret).verify(body, headers)  # raises unless a signature matches
    assert headers["webhook-id"] == sent_msg.id, headers
    assert json.loads(body) == raw, body
    step("a delivery passes the SDK's Webhook.verify (an independent implementation)")

    wait_for(
        "the attempt record",
        lambda: len(svix.message_attempt.list_by_msg(app.id, sent_msg.id).data) == 1,
    )
    svix.message_attempt.resend(app.id, sent_msg.id, live.id)
    wait_for("the resent delivery", lambda: len(Receiver.received) >= 2)
    headers, body = Receiver.received[1]
    Webhook(live_secret).verify(body, headers)
    assert headers["webhook-id"] == sent_msg.id, "a resend keeps the message id"
    wait_for(
        "the resent attempt record",
        lambda: len(svix.message_attempt.list_by_msg(app.id, sent_msg.id).data) == 2,
    )
    attempts = svix.message_attempt.list_by_msg(app.id, sent_msg.id).data
    assert sorted(int(a.trigger_type) for a in attempts) == [0, 1], attempts
    assert all(a.response_status_code == 204 and int(a.status) == 0 for a in attempts), attempts
    assert len(Receiver.received) == 2, "exactly two requests"
    step("message_attempt.resend: delivered again, signed, recorded as a manual attempt")

    # The SDK sends `with_content=false` and `expanded_statuses=true` on every attempt read.
    ok = MessageAttemptListByEndpointOptions(
        status_code_class=StatusCodeClass.CODE2XX, event_types=[et_name]
    )
    by_endpoint = svix.message_attempt.list_by_endpoint(app.id, live.id, ok).data
    assert sorted(a.id for a in by_endpoint) == sorted(a.id for a in attempts), by_endpoint
    failed = MessageAttemptListByEndpointOptions(status_code_class=StatusCodeClass.CODE5XX)
    assert svix.message_attempt.list_by_endpoint(app.id, live.id, failed).data == []
    other_type = MessageAttemptListByMsgOptions(event_types=["no.such.type"])
    assert svix.message_attempt.list_by_msg(app.id, sent_msg.id, other_type).data == []
    one = svix.message_attempt.get(app.id, sent_msg.id, attempts[0].id)
    assert one.id == attempts[0].id and one.response_status_code == 204, one
    step("message_attempt.list_by_endpoint / list_by_msg filter by status class and event type")

    # -- an ed25519 endpoint: `v1a`, checked with `cryptography` ------------------------------
    whsk, public = new_whsk()
    ed = svix.endpoint.create(
        app.id, EndpointIn(url=hook.replace("/hook", "/ed25519"), uid=f"sdk-ed-{run}", secret=whsk)
    )
    assert svix.endpoint.get_secret(app.id, ed.id).key == whsk, "the whsk_ key is answered back"
    ed_msg = svix.message.create(app.id, MessageIn(event_type=et_name, payload={"signed": "v1a"}))
    wait_for("the ed25519 delivery", lambda: len(Receiver.ed25519) >= 1)
    headers, body = Receiver.ed25519[0]
    assert headers["webhook-id"] == ed_msg.id, headers
    assert [e.split(",")[0] for e in headers["webhook-signature"].split(" ")] == ["v1a"], headers
    assert v1a_verifying(headers, body, public) == 1, "v1a does not verify"
    assert v1a_verifying(headers, body, new_whsk()[1]) == 0, "another key verifies"
    step("endpoint.create with a whsk_ secret: the delivery's v1a verifies with its public key")

    next_whsk, next_public = new_whsk()
    svix.endpoint.rotate_secret(app.id, ed.id, EndpointSecretRotateIn(key=next_whsk))
    svix.message.create(app.id, MessageIn(event_type=et_name, payload={"signed": "twice"}))
    wait_for("the delivery in the overlap", lambda: len(Receiver.ed25519) >= 2)
    headers, body = Receiver.ed25519[1]
    assert v1a_verifying(headers, body, next_public) == 1, "the new key does not sign"
    assert v1a_verifying(headers, body, public) == 1, "the old key does not sign"
    step("endpoint.rotate_secret to another whsk_: both keys sign during the overlap")

    try:
        svix.endpoint.create(app.id, EndpointIn(url=HOOK, secret="whsk_AAAA"))
        raise AssertionError("a malformed whsk_ key was accepted")
    except HTTPValidationError as e:
        assert e.status_code == 422, e.status_code
        assert [d.loc for d in e.detail] == [["body", "secret"]], e.to_dict()
    step("endpoint.create with a malformed whsk_ key raises HTTPValidationError 422 at secret")

    # -- the app portal: a token for one application ----------------------------------------
    access = svix.authentication.app_portal_access(app.id, AppPortalAccessIn())
    assert access.token.startswith("appsk_"), "not a portal token"
    assert access.url == f"{url}/portal/{access.token}", "the link is not vow's portal page"
    step("authentication.app_portal_access -> a link and a token")

    portal = Svix(access.token, SvixOptions(server_url=url, retry_schedule=[]))
    own = portal.endpoint.list(app.id)
    assert ep.id in [e.id for e in own.data], own
    step("the portal token lists its application's endpoints")

    other_app = svix.application.create(ApplicationIn(name="SDK other app"))
    svix.endpoint.create(other_app.id, EndpointIn(url=HOOK))
    try:
        portal.endpoint.list(other_app.id)
        raise AssertionError("the portal token reached another application")
    except HttpError as e:
        assert e.status_code == 404, e.status_code
    step("the portal token gets 404 for another application's endpoints")

    portal.authentication.logout()
    try:
        portal.endpoint.list(app.id)
        raise AssertionError("the token still works after logout")
    except HttpError as e:
        assert e.status_code == 401, e.status_code
    svix.application.delete(other_app.id)
    step("authentication.logout ends the token: 401 afterwards")

    # -- clean up -----------------------------------------------------------------------------
    svix.endpoint.delete(app.id, ep.id)
    try:
        svix.endpoint.get(app.id, ep.id)
        raise AssertionError("the endpoint is still there")
    except HttpError as e:
        assert e.status_code == 404, e.status_code
    step("endpoint.delete")

    svix.application.delete(app.id)
    try:
        svix.application.get(app.id)
        raise AssertionError("the application is still there")
    except HttpError as e:
        assert e.status_code == 404, e.status_code
    step("application.delete")

    svix.event_type.delete(et_name)
    assert svix.event_type.get(et_name).archived is True
    step("event_type.delete archives")

    print("all SDK steps passed")


if __name__ == "__main__":
    try:
        main()
    except Exception as e:  # noqa: BLE001 - report any failure and exit non-zero
        print(f"FAIL {type(e).__name__}: {e}", file=sys.stderr)
        raise
