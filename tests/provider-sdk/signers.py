"""Signs requests with the providers' official Python SDKs, for the Node suite beside this file.

Reads one JSON request a line on stdin and answers one JSON line on stdout:

    {"sdk": "svix", "secret": "whsec_...", "id": "msg_...", "timestamp": 1700000000,
     "payload": "{...}"}
    -> {"headers": {"svix-id": ..., "svix-timestamp": ..., "svix-signature": ...}}

or {"error": "..."} when the SDK raised; {"sdk": "versions"} -> {"versions": {name: version}}.
Only the SDKs sign here; the suite sends the requests.
"""

import json
import sys
from datetime import datetime, timezone
from importlib.metadata import version

import standardwebhooks
import stripe
import svix.webhooks


def at(unix: int) -> datetime:
    """The SDKs take the signed timestamp as a datetime."""
    return datetime.fromtimestamp(unix, tz=timezone.utc)


def sign_svix(r: dict) -> dict:
    signature = svix.webhooks.Webhook(r["secret"]).sign(r["id"], at(r["timestamp"]), r["payload"])
    return {"svix-id": r["id"], "svix-timestamp": str(r["timestamp"]), "svix-signature": signature}


def sign_standardwebhooks(r: dict) -> dict:
    webhook = standardwebhooks.Webhook(r["secret"])
    signature = webhook.sign(r["id"], at(r["timestamp"]), r["payload"])
    return {
        "webhook-id": r["id"],
        "webhook-timestamp": str(r["timestamp"]),
        "webhook-signature": signature,
    }


def sign_stripe(r: dict) -> dict:
    header = stripe.WebhookSignature.generate_signature_header(
        r["payload"], r["secret"], timestamp=r["timestamp"]
    )
    return {"stripe-signature": header}


SIGNERS = {"svix": sign_svix, "standardwebhooks": sign_standardwebhooks, "stripe": sign_stripe}


def main() -> None:
    for line in sys.stdin:
        request = json.loads(line)
        try:
            if request["sdk"] == "versions":
                answer = {"versions": {name: version(name) for name in SIGNERS}}
            else:
                answer = {"headers": SIGNERS[request["sdk"]](request)}
        except Exception as e:  # reported to the suite, which fails the test
            answer = {"error": f"{type(e).__name__}: {e}"}
        print(json.dumps(answer), flush=True)


if __name__ == "__main__":
    main()
