// What the suite needs around the SDKs: vow's admin API (sources, the events and rejections a
// source recorded), the raw ingest route, and the Python SDKs' signer (signers.py) as a child
// process answering one JSON line per request.

import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { createInterface } from "node:readline";

const url = process.env.VOW_URL;
const token = process.env.VOW_TOKEN;
if (!url || !token) {
  throw new Error("VOW_URL and VOW_TOKEN must be set (scripts/provider-sdk-compat.sh sets them)");
}

/** An admin API call; anything but the expected status fails with vow's answer. */
async function admin(method, path, body, expected = 200) {
  const response = await fetch(`${url}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  if (response.status !== expected) {
    throw new Error(`${method} ${path}: expected ${expected}, got ${response.status}: ${text}`);
  }
  return text ? JSON.parse(text) : undefined;
}

/** Every row of a list (one page of at most 250 is all a test makes), oldest first. */
async function all(path) {
  const page = await admin("GET", `${path}?limit=250&order=ascending`);
  if (!page.done) throw new Error(`${path}: more than one page`);
  return page.data;
}

export const vow = {
  /** Creates a source of `scheme` with `secrets` (and a tolerance, in seconds). */
  createSource: (scheme, secrets, toleranceSecs) =>
    admin(
      "POST",
      "/api/v1/source",
      { description: "provider SDK test", scheme, secrets, toleranceSecs },
      201,
    ),
  /** The events the source stored, oldest first. */
  events: (source) => all(`/api/v1/source/${source.id}/event`),
  /** One stored event, with its headers and payload. */
  event: (source, id) => admin("GET", `/api/v1/source/${source.id}/event/${id}`),
  /** The refusals the source recorded, oldest first. */
  rejections: (source) => all(`/api/v1/source/${source.id}/rejection`),

  /** POSTs `payload` as it is, with `headers`, to the source's ingest path. */
  async ingest(source, headers, payload) {
    const response = await fetch(`${url}${source.ingestPath}`, {
      method: "POST",
      headers,
      body: payload,
    });
    return { status: response.status, body: await response.json() };
  },
};

/** The lowercase hex SHA-256 of a payload's UTF-8 bytes, as vow stores it. */
export const sha256 = (payload) => createHash("sha256").update(payload, "utf8").digest("hex");

/** The UTF-8 byte length of a payload. */
export const size = (payload) => Buffer.byteLength(payload, "utf8");

/**
 * The Python SDKs' signer: `sign(sdk, request)` resolves to the headers the SDK made, or rejects
 * with what it raised. `versions` are the installed versions of the Python SDKs.
 */
export function pythonSigner() {
  const python = process.env.VOW_TEST_PYTHON;
  if (!python) throw new Error("VOW_TEST_PYTHON must name the Python that has requirements.txt");
  const child = spawn(python, [new URL("signers.py", import.meta.url).pathname], {
    stdio: ["pipe", "pipe", "inherit"],
  });
  const waiting = [];
  const lines = createInterface({ input: child.stdout });
  lines.on("line", (line) => waiting.shift()(JSON.parse(line)));
  child.on("exit", (code) => {
    while (waiting.length) waiting.shift()({ error: `the signer exited with ${code}` });
  });
  const ask = (request) =>
    new Promise((resolve) => {
      waiting.push(resolve);
      child.stdin.write(`${JSON.stringify(request)}\n`);
    });
  return {
    async sign(sdk, request) {
      const answer = await ask({ sdk, ...request });
      if (answer.error) throw new Error(`the ${sdk} SDK could not sign: ${answer.error}`);
      return answer.headers;
    },
    async versions() {
      const answer = await ask({ sdk: "versions" });
      if (answer.error) throw new Error(answer.error);
      return answer.versions;
    },
    close: () => child.stdin.end(),
  };
}
