// The console's only way to the gateway: its public API, called with the browser's credentials.
//
// With HTTP Basic on, the browser asked for a user and password when the page loaded (the
// gateway answers 401 with a Basic challenge) and sends them with every call below; a mutual-TLS
// browser sends its certificate. What a call may do is what the API lets that principal do.

import { parseExact, showJson } from "./decode.js";

// The gateway's root: the page is served at <root>/ui.
export const ROOT = new URL(".", document.baseURI).pathname.replace(/\/$/, "");
export const FORMATS = ["binary", "json", "string", "avro", "jsonschema", "protobuf"];
export const SCHEMA_FORMATS = ["avro", "jsonschema", "protobuf"];
export const enc = encodeURIComponent;

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }

  get advice() {
    if (this.status === 401) return " Reload the page to sign in again.";
    if (this.status === 403) return " Your principal lacks the ACL binding for it.";
    return "";
  }
}

// An absolute URL on the page's origin: never one holding the user and password the page may
// have been opened with (fetch refuses those; the browser sends the credentials it was given).
export function url(path, query) {
  const search = query ? "?" + new URLSearchParams(query) : "";
  return location.origin + ROOT + path + search;
}

export async function call(method, path, { query, body, contentType, accept, signal } = {}) {
  const init = { method, headers: { Accept: accept || "application/json" }, credentials: "same-origin", cache: "no-store", signal };
  if (body !== undefined) {
    init.body = showJson(body); // JSON.stringify, with numbers the user typed kept as typed
    init.headers["Content-Type"] = contentType || "application/json";
  }
  let response;
  try {
    response = await fetch(url(path, query), init);
  } catch (error) {
    if (error.name === "AbortError") throw error;
    throw new ApiError(0, null, "The gateway cannot be reached.");
  }
  const text = await response.text();
  let data = null;
  try {
    data = text ? parseExact(text) : null;
  } catch {
    data = null;
  }
  if (!response.ok) {
    const message = data && typeof data.message === "string" ? data.message : `${response.status} ${response.statusText}`;
    throw new ApiError(response.status, data && data.error_code, message);
  }
  return data;
}

export const get = (path, options) => call("GET", path, options);

export function errorText(error) {
  return error instanceof ApiError ? `${error.message}${error.advice}` : String(error.message || error);
}

let clusterId = null;

// A path under this gateway's v3 cluster (asked once).
export async function v3(path) {
  if (clusterId === null) clusterId = (await get("/v3/clusters")).data[0].cluster_id;
  return `/v3/clusters/${enc(clusterId)}${path}`;
}

export function mediaType(format) {
  return `application/vnd.kafka.${format}.v2+json`;
}

// Records of one partition from ``offset`` (the stateless read): {records, next_offset, high_watermark}.
export function readPartition(topic, partition, offset, { format = "binary", maxBytes = 256 * 1024, signal } = {}) {
  return get(`/topics/${enc(topic)}/partitions/${partition}/records`, {
    query: { offset, max_bytes: maxBytes, timeout: 0 },
    accept: mediaType(format),
    signal,
  });
}

export function partitionOffsets(topic, partition) {
  return get(`/topics/${enc(topic)}/partitions/${partition}/offsets`);
}

// Partitions of a topic with their beginning and end offsets (v3).
export async function partitions(topic) {
  return (await get(await v3(`/topics/${enc(topic)}/partitions`))).data;
}
