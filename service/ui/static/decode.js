// What a record's bytes say, for people: text, JSON exactly as stored, or hex; and JSON numbers
// kept as written (a 64-bit id or a nanosecond timestamp is not rounded to a double).

// A JSON number a double cannot hold as written: shown with its own text.
export class ExactNumber {
  constructor(text) {
    this.text = text;
  }
}

// JSON.parse, with every number whose text a double would change kept as an ``ExactNumber``.
export function parseExact(text) {
  return JSON.parse(text, (key, value, context) => {
    if (typeof value === "number" && context && typeof context.source === "string" && context.source !== String(value)) {
      return new ExactNumber(context.source);
    }
    return value;
  });
}

// JSON text of a parsed value, ``ExactNumber``s as written; ``indent`` as JSON.stringify's.
export function showJson(value, indent = 0) {
  const pad = (depth) => (indent ? "\n" + " ".repeat(indent * depth) : "");
  const walk = (v, depth) => {
    if (v instanceof ExactNumber) return v.text;
    if (Array.isArray(v)) {
      if (!v.length) return "[]";
      return "[" + v.map((item) => pad(depth + 1) + walk(item, depth + 1)).join(",") + pad(depth) + "]";
    }
    if (v && typeof v === "object") {
      const entries = Object.entries(v);
      if (!entries.length) return "{}";
      const sep = indent ? ": " : ":";
      return "{" + entries.map(([k, item]) => pad(depth + 1) + JSON.stringify(k) + sep + walk(item, depth + 1)).join(",") + pad(depth) + "}";
    }
    return JSON.stringify(v === undefined ? null : v);
  };
  return walk(value, 0);
}

export function base64Bytes(text) {
  const binary = atob(text);
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  return bytes;
}

export function bytesBase64(bytes) {
  let binary = "";
  for (let i = 0; i < bytes.length; i += 0x8000) binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(binary);
}

export function textBase64(text) {
  return bytesBase64(new TextEncoder().encode(text));
}

const utf8 = new TextDecoder("utf-8", { fatal: true });
const HEX_SHOWN = 512;

function hex(bytes) {
  const shown = Array.from(bytes.subarray(0, HEX_SHOWN), (b) => b.toString(16).padStart(2, "0")).join(" ");
  return bytes.length > HEX_SHOWN ? `${shown} … (${bytes.length} bytes)` : shown;
}

// The schema-registry wire format: a zero byte, then the schema id in four bytes.
export function schemaIdOf(bytes) {
  if (bytes.length < 5 || bytes[0] !== 0) return null;
  return new DataView(bytes.buffer, bytes.byteOffset + 1, 4).getUint32(0);
}

// A key or value read in the binary format (base64), as {kind, text, schemaId}: kind is "null",
// "json" (the stored text, which is JSON), "text", "schema" (the wire format) or "bytes" (hex).
export function describeBytes(base64) {
  if (base64 === null || base64 === undefined) return { kind: "null", text: "null" };
  const bytes = base64Bytes(base64);
  const schemaId = schemaIdOf(bytes);
  if (schemaId !== null) return { kind: "schema", text: `schema id ${schemaId}: ${hex(bytes.subarray(5))}`, schemaId };
  let text;
  try {
    text = utf8.decode(bytes);
  } catch {
    return { kind: "bytes", text: hex(bytes) };
  }
  try {
    JSON.parse(text);
    return { kind: "json", text };
  } catch {
    return { kind: "text", text };
  }
}

// A key or value the gateway decoded in ``format`` (anything but binary), as {kind, text}.
export function describeDecoded(value, format) {
  if (value === null || value === undefined) return { kind: "null", text: "null" };
  if (format === "string") return { kind: "text", text: value };
  return { kind: "json", text: showJson(value) };
}

export function describe(value, format) {
  return format === "binary" ? describeBytes(value) : describeDecoded(value, format);
}

// Headers ([{name, value: base64|null}]) as "name: value" lines, values as UTF-8 text when they are.
export function headerLines(headers) {
  return (headers || []).map(({ name, value }) => {
    if (value === null || value === undefined) return `${name}: null`;
    const bytes = base64Bytes(value);
    try {
      return `${name}: ${utf8.decode(bytes)}`;
    } catch {
      return `${name}: 0x ${hex(bytes)}`;
    }
  });
}

export function prettyText(described) {
  if (described.kind !== "json") return described.text;
  try {
    return showJson(parseExact(described.text), 2);
  } catch {
    return described.text;
  }
}

export function formatTime(millis) {
  if (millis === null || millis === undefined || millis < 0) return "";
  const date = new Date(millis);
  return Number.isNaN(date.getTime()) ? String(millis) : date.toISOString().replace("T", " ").replace("Z", " UTC");
}

export function formatNumber(n) {
  return typeof n === "number" ? n.toLocaleString("en-US") : n instanceof ExactNumber ? n.text : String(n ?? "");
}
