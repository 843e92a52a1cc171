// The providers' official SDKs sign; a running vow must accept what they sign, once, and refuse
// it turned bad, recording each refusal (issue 5). Run by scripts/provider-sdk-compat.sh against
// `vow serve` on SQLite and on PostgreSQL, with VOW_URL, VOW_TOKEN and VOW_TEST_PYTHON set.
//
// For every SDK, on a source of its scheme: a request the SDK signed is stored once (one row,
// the provider's event id, the body's SHA-256, the body byte for byte); sent again it is a
// duplicate (still one row, duplicates 1); then the body changed after signing, the signature
// bytes changed, the signature header garbled or missing, and (where the provider signs a
// timestamp) a timestamp signed outside the tolerance, each answered with its exact status and
// reason, recorded as one rejection, and storing nothing. On a source with two secrets (a
// rotation), what the SDK signs with either is accepted, so is a header carrying signatures with
// several secrets (as providers send while their secret rolls), and another secret is refused.
// Assertions count the rows the admin API lists, not only status codes.

import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";

import { providers } from "./providers.mjs";
import { pythonSigner, sha256, size, vow } from "./vow.mjs";

const TOLERANCE_SECS = 300;
const now = () => Math.floor(Date.now() / 1000);

const python = pythonSigner();
after(() => python.close());
const sdks = await providers(python);

/** Asserts vow answered 200 with `outcome` and returns the id of the event it stored. */
function assertAccepted(answer, outcome) {
  assert.equal(answer.status, 200, JSON.stringify(answer.body));
  assert.equal(answer.body.outcome, outcome);
  assert.match(answer.body.id, /^inevt_/);
  return answer.body.id;
}

/** Asserts the source holds exactly one event row, `id`, stored as `event` with `duplicates`. */
async function assertStoredOnce(source, id, event, duplicates) {
  const rows = await vow.events(source);
  assert.equal(rows.length, 1, `one event row, got ${JSON.stringify(rows)}`);
  const [row] = rows;
  assert.equal(row.id, id);
  assert.equal(row.eventId, event.eventId);
  assert.equal(row.state, "received");
  assert.equal(row.sha256, sha256(event.payload));
  assert.equal(row.size, size(event.payload));
  assert.equal(row.duplicates, duplicates);
  assert.equal(row.conflictsWith, null);
}

for (const sdk of sdks) {
  describe(sdk.name, () => {
    let source; // secrets: [secret]
    let secret;
    let event; // the one the SDK signed and vow stored
    let stored; // its id in vow
    const refusals = []; // every refusal expected on `source`, in order

    before(async () => {
      secret = sdk.secret();
      source = await vow.createSource(sdk.scheme, [secret], TOLERANCE_SECS);
      assert.equal(source.secretCount, 1);
    });

    /** POSTs `payload` with `headers`, expects refusal `status`/`reason`, one more rejection
     * row saying so, and the source's events unchanged. */
    async function assertRefused(headers, payload, status, reason) {
      const answer = await vow.ingest(source, headers, payload);
      assert.equal(answer.status, status, JSON.stringify(answer.body));
      assert.equal(answer.body.code, reason, JSON.stringify(answer.body));
      refusals.push({ reason, status, bodySize: size(payload) });
      const rows = await vow.rejections(source);
      assert.equal(rows.length, refusals.length, `rejection rows: ${JSON.stringify(rows)}`);
      const last = rows.at(-1);
      assert.deepEqual(
        { reason: last.reason, status: last.status, bodySize: last.bodySize },
        refusals.at(-1),
      );
      await assertStoredOnce(source, stored, event, 1); // nothing new stored, nothing counted
    }

    /** The headers of `event` as the provider sends it, signed by the SDK with `key`. */
    async function signWith(event, key, timestamp) {
      const headers = { ...event.headers, ...(await sdk.sign(key, event, timestamp)) };
      assert.ok(headers[sdk.signatureHeader], `the SDK made no ${sdk.signatureHeader} header`);
      return headers;
    }

    /** A fresh event, signed by the SDK at `timestamp`, as the provider would send it. */
    async function signed(timestamp = now(), key = secret) {
      const fresh = sdk.event();
      return { event: fresh, headers: await signWith(fresh, key, timestamp) };
    }

    let request; // the accepted request's headers
    it("accepts a request the SDK signed and stores it once, byte for byte", async () => {
      ({ event, headers: request } = await signed());
      stored = assertAccepted(await vow.ingest(source, request, event.payload), "received");
      await assertStoredOnce(source, stored, event, 0);
      const one = await vow.event(source, stored);
      assert.equal(one.payload, event.payload);
      assert.deepEqual(await vow.rejections(source), []);
    });

    it("takes the same signed request again as a duplicate of the one row", async () => {
      const id = assertAccepted(await vow.ingest(source, request, event.payload), "duplicate");
      assert.equal(id, stored);
      await assertStoredOnce(source, stored, event, 1);
      assert.deepEqual(await vow.rejections(source), []);
    });

    it("refuses the body changed after signing: 401 signature_mismatch", async () => {
      assert.notEqual(event.tampered, event.payload);
      await assertRefused(request, event.tampered, 401, "signature_mismatch");
    });

    for (const [what, turn, status, reason] of [
      ["the signature bytes changed", sdk.flip, 401, "signature_mismatch"],
      ["the signature header garbled", sdk.garble, 400, "malformed_header"],
    ]) {
      it(`refuses ${what}: ${status} ${reason}`, async () => {
        const { event: fresh, headers } = await signed();
        const header = sdk.signatureHeader;
        const bad = { ...headers, [header]: turn(headers[header]) };
        assert.notEqual(bad[header], headers[header]);
        await assertRefused(bad, fresh.payload, status, reason);
      });
    }

    it("refuses the signature header missing: 400 missing_header", async () => {
      const { event: fresh, headers } = await signed();
      const { [sdk.signatureHeader]: _, ...missing } = headers;
      await assertRefused(missing, fresh.payload, 400, "missing_header");
    });

    const untimed = !sdk.timestamped && "the provider signs no timestamp";
    it(
      "refuses a timestamp signed an hour ago: 401 timestamp_too_old",
      { skip: untimed },
      async () => {
        const { event: old, headers } = await signed(now() - 3600);
        await assertRefused(headers, old.payload, 401, "timestamp_too_old");
      },
    );

    it(
      "refuses a timestamp signed an hour ahead: 401 timestamp_too_new",
      { skip: untimed },
      async () => {
        const { event: early, headers } = await signed(now() + 3600);
        await assertRefused(headers, early.payload, 401, "timestamp_too_new");
      },
    );

    it(
      "accepts a timestamp signed within the tolerance, a minute ago",
      { skip: untimed },
      async () => {
        const other = await vow.createSource(sdk.scheme, [secret], TOLERANCE_SECS);
        const { event: late, headers } = await signed(now() - 60);
        assertAccepted(await vow.ingest(other, headers, late.payload), "received");
        assert.equal((await vow.events(other)).length, 1);
      },
    );

    it("records every refusal once, in order, and still holds the one event", async () => {
      const rows = await vow.rejections(source);
      assert.deepEqual(
        rows.map((r) => ({ reason: r.reason, status: r.status, bodySize: r.bodySize })),
        refusals,
      );
      await assertStoredOnce(source, stored, event, 1);
    });

    describe("during a secret rotation (a source with two secrets)", () => {
      let rotated;
      let old;
      let current;
      before(async () => {
        [old, current] = [sdk.secret(), sdk.secret()];
        rotated = await vow.createSource(sdk.scheme, [old, current], TOLERANCE_SECS);
        assert.equal(rotated.secretCount, 2);
      });

      for (const [which, key] of [
        ["the second (new) secret", () => current],
        ["the first (old) secret", () => old],
      ]) {
        it(`accepts what the SDK signed with ${which}`, async () => {
          const count = (await vow.events(rotated)).length;
          const { event: fresh, headers } = await signed(now(), key());
          const id = assertAccepted(await vow.ingest(rotated, headers, fresh.payload), "received");
          const rows = await vow.events(rotated);
          assert.equal(rows.length, count + 1);
          const row = rows.find((r) => r.id === id);
          assert.equal(row.eventId, fresh.eventId);
          assert.equal(row.sha256, sha256(fresh.payload));
        });
      }

      const several = !sdk.combine && "the provider sends one signature a delivery";
      it(
        "accepts signatures with several secrets, one of them the source's",
        { skip: several },
        async () => {
          const fresh = sdk.event();
          const timestamp = now();
          const [foreign, ours] = [
            await signWith(fresh, sdk.secret(), timestamp),
            await signWith(fresh, current, timestamp),
          ];
          const header = sdk.signatureHeader;
          const headers = { ...ours, [header]: sdk.combine(foreign[header], ours[header]) };
          const id = assertAccepted(await vow.ingest(rotated, headers, fresh.payload), "received");
          const row = (await vow.events(rotated)).find((r) => r.id === id);
          assert.equal(row.eventId, fresh.eventId);
        },
      );

      it("refuses what the SDK signed with a secret the source does not hold: 401", async () => {
        const count = (await vow.events(rotated)).length;
        const { event: fresh, headers } = await signed(now(), sdk.secret());
        const answer = await vow.ingest(rotated, headers, fresh.payload);
        assert.equal(answer.status, 401, JSON.stringify(answer.body));
        assert.equal(answer.body.code, "signature_mismatch");
        const rows = await vow.rejections(rotated);
        assert.deepEqual(
          rows.map((r) => [r.reason, r.status, r.bodySize]),
          [["signature_mismatch", 401, size(fresh.payload)]],
        );
        assert.equal((await vow.events(rotated)).length, count);
      });
    });
  });
}
