// The providers and their official SDKs, each as what the scenario in provider-sdk.test.mjs needs:
// vow's scheme name, a fresh secret, a realistic event (its payload as the provider sends it, the
// id vow must store it under, the payload changed after signing), how the SDK signs it (the
// request's headers), the signature header turned bad (bytes changed, garbled), and two of its
// values joined as the provider does when it signs with several secrets at once.

import { randomBytes, randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";

import { sign as octokitSign } from "@octokit/webhooks-methods";
import { Webhook as StandardWebhook } from "standardwebhooks";
import Stripe from "stripe";

/** The installed version of an npm package (npm ci installs exactly the lockfile's). */
const npmVersion = (name) =>
  JSON.parse(readFileSync(new URL(`node_modules/${name}/package.json`, import.meta.url))).version;

const ALNUM = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
/** `n` random letters and digits, as provider ids are made of. */
const alnum = (n) => Array.from(randomBytes(n), (b) => ALNUM[b % ALNUM.length]).join("");

/** `text` with the character at `index` (negative: from the end) replaced by another of the
 * same alphabet, so the header stays well-formed and only the signature bytes differ. */
const flipAt = (text, index) => {
  const i = index < 0 ? text.length + index : index;
  const other = text[i] === "a" ? "b" : "a";
  return text.slice(0, i) + other + text.slice(i + 1);
};

const json = { "content-type": "application/json" };

// -- events ------------------------------------------------------------------------------------

/** A Stripe `payment_intent.succeeded` event, pretty-printed as Stripe sends them. */
function stripeEvent() {
  const id = `evt_${alnum(24)}`;
  const event = (amount) => ({
    id,
    object: "event",
    api_version: "2024-06-20",
    created: Math.floor(Date.now() / 1000),
    data: {
      object: {
        id: `pi_${alnum(24)}`,
        object: "payment_intent",
        amount,
        amount_received: amount,
        currency: "eur",
        customer: `cus_${alnum(14)}`,
        description: "Café order #1042 — 2 × flat white ☕",
        metadata: { order_id: "1042" },
        status: "succeeded",
      },
    },
    livemode: false,
    pending_webhooks: 1,
    request: { id: `req_${alnum(14)}`, idempotency_key: randomUUID() },
    type: "payment_intent.succeeded",
  });
  return {
    eventId: id,
    payload: JSON.stringify(event(2000), null, 2),
    tampered: JSON.stringify(event(200000), null, 2),
    headers: { ...json, "user-agent": "Stripe/1.0 (+https://stripe.com/docs/webhooks)" },
  };
}

/** A GitHub `push` delivery: compact JSON, the delivery GUID and hook id in headers. */
function githubEvent() {
  const delivery = randomUUID();
  const push = (message) => ({
    ref: "refs/heads/main",
    before: randomBytes(20).toString("hex"),
    after: randomBytes(20).toString("hex"),
    repository: { id: 1296269, name: "vow", full_name: "octocat/vow", private: false },
    pusher: { name: "octocat", email: "octocat@github.com" },
    sender: { login: "octocat", id: 1, type: "User" },
    head_commit: { message, author: { name: "Zoë Ångström", username: "octocat" } },
  });
  return {
    eventId: delivery,
    payload: JSON.stringify(push("Fix naïve parsing of ümlauts")),
    tampered: JSON.stringify(push("Add a backdoor")),
    headers: {
      ...json,
      "user-agent": "GitHub-Hookshot/044aadd",
      "x-github-event": "push",
      "x-github-delivery": delivery,
      "x-github-hook-id": "292430182",
      "x-github-hook-installation-target-type": "repository",
      "x-github-hook-installation-target-id": "1296269",
    },
  };
}

/** A Standard Webhooks / Svix message: `{type, timestamp, data}`, the id in `webhook-id`. */
function standardEvent() {
  const id = `msg_${alnum(27)}`;
  const message = (amount) => ({
    type: "invoice.paid",
    timestamp: new Date().toISOString(),
    data: { invoice_id: `inv_${alnum(12)}`, amount, currency: "USD", customer: "Jürgen Müller" },
  });
  return {
    eventId: id,
    payload: JSON.stringify(message(4200)),
    tampered: JSON.stringify(message(1)),
    headers: { ...json, "user-agent": "Svix-Webhooks/1.0" },
  };
}

// -- secrets -----------------------------------------------------------------------------------

const stripeSecret = () => `whsec_${alnum(32)}`;
const githubSecret = () => `It's a Secret to Everybody ${alnum(12)}`;
/** A Standard Webhooks secret: `whsec_` and random bytes in padded base64, 24 of them (as Svix
 * makes them) on the first call, then 32, then 64 (the spec allows 24 to 64), and round again. */
const standardLengths = [24, 32, 64];
let standardCalls = 0;
const standardSecret = () => {
  const length = standardLengths[standardCalls++ % standardLengths.length];
  return `whsec_${randomBytes(length).toString("base64")}`;
};

// -- the providers -----------------------------------------------------------------------------

const stripe = {
  scheme: "stripe",
  secret: stripeSecret,
  event: stripeEvent,
  signatureHeader: "stripe-signature",
  timestamped: true,
  flip: (value) => flipAt(value, -1), // the last hex digit of `v1=`
  garble: (value) => value.replace(/^t=\d+,/, ""), // no timestamp entry
  // Stripe's header while a secret rolls: one `v1=` per secret, after the one `t=`.
  combine: (a, b) => `${a},${b.replace(/^t=\d+,/, "")}`,
};

const github = {
  scheme: "github",
  secret: githubSecret,
  event: githubEvent,
  signatureHeader: "x-hub-signature-256",
  timestamped: false,
  flip: (value) => flipAt(value, -1),
  garble: (value) => value.replace(/^sha256=/, ""), // the prefix dropped
  combine: null, // one signature a delivery
};

/** Standard Webhooks under its own header names (`webhook-*`) or Svix's (`svix-*`). */
const standard = (prefix) => ({
  scheme: prefix === "svix" ? "svix" : "standard-webhooks",
  secret: standardSecret,
  event: standardEvent,
  signatureHeader: `${prefix}-signature`,
  timestamped: true,
  flip: (value) => flipAt(value, 10), // inside the base64 of `v1,`
  garble: (value) => value.replace(",", ""), // no `<version>,<signature>` entry
  // A sender signing with several secrets: space-separated `v1,` entries.
  combine: (a, b) => `${a} ${b}`,
});

/** Every SDK under test; `python` is the signer of the Python SDKs (vow.mjs). */
export async function providers(python) {
  const py = await python.versions();
  // The Python SDKs take what the Node ones do; each names its own headers.
  const pySign = (sdk) => (secret, event, timestamp) =>
    python.sign(sdk, { secret, id: event.eventId, timestamp, payload: event.payload });
  return [
    {
      ...stripe,
      name: `npm stripe ${npmVersion("stripe")} (Stripe.webhooks.generateTestHeaderString)`,
      sign: async (secret, event, timestamp) => ({
        "stripe-signature": Stripe.webhooks.generateTestHeaderString({
          payload: event.payload,
          secret,
          timestamp,
        }),
      }),
    },
    {
      ...stripe,
      name: `PyPI stripe ${py.stripe} (WebhookSignature.generate_signature_header)`,
      sign: pySign("stripe"),
    },
    {
      ...github,
      name: `npm @octokit/webhooks-methods ${npmVersion("@octokit/webhooks-methods")} (sign)`,
      sign: async (secret, event) => ({
        "x-hub-signature-256": await octokitSign(secret, event.payload),
      }),
    },
    {
      ...standard("webhook"),
      name: `npm standardwebhooks ${npmVersion("standardwebhooks")} (Webhook.sign)`,
      sign: async (secret, event, timestamp) => ({
        "webhook-id": event.eventId,
        "webhook-timestamp": String(timestamp),
        "webhook-signature": new StandardWebhook(secret).sign(
          event.eventId,
          new Date(timestamp * 1000),
          event.payload,
        ),
      }),
    },
    {
      ...standard("webhook"),
      name: `PyPI standardwebhooks ${py.standardwebhooks} (Webhook.sign)`,
      sign: pySign("standardwebhooks"),
    },
    {
      ...standard("svix"),
      name: `PyPI svix ${py.svix} (svix.webhooks.Webhook.sign)`,
      sign: pySign("svix"),
    },
  ];
}
