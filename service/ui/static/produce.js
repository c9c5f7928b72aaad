// The produce form: one record, in any of the gateway's formats, to a partition or by key.

import { FORMATS, SCHEMA_FORMATS, call, enc, errorText, mediaType } from "./api.js";
import { parseExact, textBase64 } from "./decode.js";
import { field, h, notice, select } from "./dom.js";

const HINTS = {
  binary: "Key and value are base64.",
  json: "Key and value are JSON (a string in quotes).",
  string: "Key and value are text.",
  avro: "Key and value are JSON, written with the schema (its id, or its text: registered first).",
  jsonschema: "Key and value are JSON, checked against the schema (its id, or its text: registered first).",
  protobuf: "Key and value are Protobuf's JSON mapping of the schema's first message (its id, or its .proto text).",
};

export function produceForm(topic, getPartitions, produced) {
  const partition = select("partition", [["", "by key (or spread)"]], "");
  const format = select("format", FORMATS.map((f) => [f, f]), "json");
  const key = h("textarea", { name: "key", rows: 1, placeholder: "none", spellcheck: "false" });
  const value = h("textarea", { name: "value", rows: 4, placeholder: "null (a tombstone)", spellcheck: "false" });
  const headers = h("textarea", { name: "headers", rows: 2, placeholder: "name: value (one a line, UTF-8)", spellcheck: "false" });
  const keySchema = h("textarea", { name: "key_schema", rows: 2, placeholder: "schema id or text", spellcheck: "false" });
  const valueSchema = h("textarea", { name: "value_schema", rows: 3, placeholder: "schema id or text", spellcheck: "false" });
  const hint = h("p", { class: "muted" });
  const status = h("div", { id: "produce-status" });
  const schemas = h("div", { class: "schemas" }, field("Key schema", keySchema), field("Value schema", valueSchema));
  const form = h(
    "form",
    { id: "produce", class: "stack" },
    h("div", { class: "inline" }, field("Partition", partition), field("Format", format)),
    hint,
    field("Key", key),
    field("Value", value),
    field("Headers", headers),
    schemas,
    h("div", {}, h("button", { type: "submit", text: "Produce" })),
  );
  const element = h("div", { class: "panel write", id: "produce-panel", role: "tabpanel" }, form, status);

  const sync = () => {
    hint.textContent = HINTS[format.value];
    schemas.hidden = !SCHEMA_FORMATS.includes(format.value);
  };
  format.addEventListener("change", sync);
  sync();
  getPartitions().then((parts) => partition.append(...parts.map((p) => h("option", { value: p.partition_id, text: String(p.partition_id) }))));

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    let body;
    try {
      body = request();
    } catch (error) {
      notice(status, error.message, "error");
      return;
    }
    try {
      const answer = await call("POST", `/topics/${enc(topic)}`, { body, contentType: mediaType(format.value) });
      const [stored] = answer.offsets;
      if (stored.error) throw new Error(stored.error);
      const where = `#/topics/${enc(topic)}/records?partition=${stored.partition}&offset=${stored.offset}`;
      notice(status, "");
      status.append(
        h("p", { class: "notice ok", role: "status" }, `Stored in partition ${stored.partition} at offset ${stored.offset}. `, h("a", { href: where, text: "Show it" })),
      );
      produced(stored);
    } catch (error) {
      notice(status, errorText(error), "error");
    }
  });

  // The produce request the form describes (an Error naming the field that is wrong).
  function request() {
    const fmt = format.value;
    const record = {};
    if (key.value !== "") record.key = datum("Key", key.value, fmt);
    record.value = value.value === "" ? null : datum("Value", value.value, fmt);
    if (partition.value !== "") record.partition = Number(partition.value);
    const lines = headers.value.split("\n").filter((line) => line.trim());
    if (lines.length) {
      record.headers = lines.map((line) => {
        const at = line.indexOf(":");
        if (at < 1) throw new Error(`Headers: "${line}" is not "name: value".`);
        return { name: line.slice(0, at).trim(), value: textBase64(line.slice(at + 1).trim()) };
      });
    }
    const body = { records: [record] };
    if (SCHEMA_FORMATS.includes(fmt)) {
      schemaOf(body, "key", keySchema.value, record.key !== undefined);
      schemaOf(body, "value", valueSchema.value, record.value !== null);
    }
    return body;
  }

  return { element };
}

function datum(name, text, format) {
  if (format === "string") return text;
  if (format === "binary") {
    const compact = text.replace(/\s+/g, "");
    if (!/^[A-Za-z0-9+/]*={0,2}$/.test(compact) || compact.length % 4) throw new Error(`${name}: not base64.`);
    return compact;
  }
  try {
    return parseExact(text);
  } catch (error) {
    throw new Error(`${name}: not JSON (${error.message}).`);
  }
}

// ``<part>_schema_id`` when the field is a number, else ``<part>_schema`` (the schema's text).
function schemaOf(body, part, text, needed) {
  const given = text.trim();
  if (!given) {
    if (needed) throw new Error(`Give the ${part} schema: its id or its text.`);
    return;
  }
  if (/^\d+$/.test(given)) body[`${part}_schema_id`] = Number(given);
  else body[`${part}_schema`] = given;
}
