// The record browser: one partition at a time, from an offset, from a time, the oldest or the
// newest records; keys, values and headers decoded; a search over the page that is loaded.

import { ApiError, FORMATS, errorText, get, partitionOffsets, readPartition } from "./api.js";
import { describe, formatNumber, formatTime, headerLines, prettyText } from "./decode.js";
import { clear, field, h, notice, select, table } from "./dom.js";

const PAGE_SIZES = [20, 50, 100, 500];
const MAX_READS = 20; // reads one page may take (each returns up to READ_BYTES)
const READ_BYTES = 256 * 1024;
const SHORT = 300; // characters of a value shown until its row is opened
const SCHEMA_TYPE_FORMATS = { AVRO: "avro", JSON: "jsonschema", PROTOBUF: "protobuf" };
const schemaTypes = new Map(); // schema id -> its format, asked of the registry once

export function recordBrowser(topic, getPartitions) {
  const partition = select("partition", [], 0);
  const from = select("from", [["oldest", "the oldest"], ["newest", "the newest"], ["offset", "an offset"], ["time", "a time"]], "oldest");
  const offset = h("input", { name: "offset", type: "number", min: 0, value: 0 });
  const time = h("input", { name: "time", type: "datetime-local", step: 1 });
  const format = select("format", [["auto", "auto-detect"], ...FORMATS.map((f) => [f, f])], "auto");
  const size = select("count", PAGE_SIZES.map((n) => [n, String(n)]), 50);
  const search = h("input", { name: "search", type: "search", placeholder: "Search this page: keys, values, headers", autocomplete: "off" });
  const status = h("div");
  const matches = h("span", { class: "muted", id: "matches" });
  const results = h("div", { class: "records" });
  const older = h("button", { type: "button", name: "older", text: "‹ Older", disabled: true });
  const newer = h("button", { type: "button", name: "newer", text: "Newer ›", disabled: true });
  const form = h(
    "form",
    { class: "inline", id: "browse" },
    field("Partition", partition),
    field("From", from),
    field("Offset", offset),
    field("Time (local)", time),
    field("Format", format),
    field("Records", size),
    h("button", { type: "submit", text: "Load" }),
  );
  const element = h(
    "div",
    { class: "panel", id: "records-panel", role: "tabpanel" },
    form,
    status,
    h("div", { class: "inline" }, older, newer, search, matches),
    results,
  );
  let shown = null; // {partition, first, last, begin, end}
  let loading = null; // aborts the page being read when another is asked for

  const syncFrom = () => {
    offset.closest("label").hidden = from.value !== "offset";
    time.closest("label").hidden = from.value !== "time";
  };
  from.addEventListener("change", syncFrom);
  syncFrom();

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    load();
  });
  older.addEventListener("click", () => shown && load({ offset: Math.max(shown.begin, shown.first - Number(size.value)) }));
  newer.addEventListener("click", () => shown && load({ offset: shown.last + 1 }));
  search.addEventListener("input", () => filter());

  async function fillPartitions() {
    const parts = await getPartitions();
    if (partition.options.length === parts.length) return;
    const current = partition.value;
    clear(partition).append(...parts.map((p) => h("option", { value: p.partition_id, text: String(p.partition_id) })));
    if (current) partition.value = current;
  }

  async function startOffset(p) {
    if (from.value === "offset") return Number(offset.value);
    const { beginning_offset: begin, end_offset: end } = await partitionOffsets(topic, p);
    if (from.value === "newest") return Math.max(begin, end - Number(size.value));
    if (from.value === "time") {
      const at = new Date(time.value).getTime();
      if (Number.isNaN(at)) throw new Error("Give a time to start from.");
      return offsetForTime(topic, p, at, begin, end);
    }
    return begin;
  }

  async function load(at = {}) {
    loading?.abort();
    const abort = (loading = new AbortController());
    notice(status, "Loading…", "info");
    try {
      await fillPartitions();
      const p = Number(partition.value);
      const first = at.offset ?? (await startOffset(p));
      offset.value = first;
      const page = await readPage(topic, p, first, Number(size.value), format.value, abort.signal);
      if (abort.signal.aborted) return;
      const { beginning_offset: begin } = await partitionOffsets(topic, p);
      const last = page.records.length ? page.records[page.records.length - 1].offset : first - 1;
      shown = { partition: p, first: page.records.length ? page.records[0].offset : first, last, begin, end: page.end };
      older.disabled = shown.first <= begin;
      newer.disabled = last + 1 >= page.end;
      const range = !page.records.length
        ? `no records from offset ${formatNumber(first)}`
        : shown.first === last
          ? `offset ${formatNumber(last)}`
          : `offsets ${formatNumber(shown.first)}–${formatNumber(last)}`;
      notice(status, `Partition ${p}: ${range} (end offset ${formatNumber(page.end)})${page.note ? ". " + page.note : ""}`, "info");
      render(page.records, page.format);
    } catch (error) {
      if (error.name !== "AbortError") notice(status, errorText(error), "error");
    }
  }

  function render(records, shownFormat) {
    const rows = records.map((r) => ({
      record: r,
      key: describe(r.key, shownFormat),
      value: describe(r.value, shownFormat),
      headers: headerLines(r.headers),
    }));
    const cellOf = (described) => {
      const short = described.text.length > SHORT ? described.text.slice(0, SHORT) + "…" : described.text;
      const pre = h("pre", { class: `value ${described.kind}`, title: described.kind, text: short });
      pre.addEventListener("click", () => {
        const open = pre.classList.toggle("open");
        pre.textContent = open ? prettyText(described) : short;
      });
      return pre;
    };
    clear(results).append(
      table(
        [
          { title: "Offset", class: "num", cell: (row) => formatNumber(row.record.offset) },
          { title: "Timestamp", class: "time", cell: (row) => formatTime(row.record.timestamp) },
          { title: "Key", cell: (row) => cellOf(row.key) },
          { title: "Headers", cell: (row) => h("pre", { class: "headers", text: row.headers.join("\n") }) },
          { title: "Value", cell: (row) => cellOf(row.value) },
        ],
        rows,
        {
          empty: "No records here.",
          rowProps: (row) => ({ data: { offset: row.record.offset, search: [row.key.text, row.value.text, ...row.headers].join("\n").toLowerCase() } }),
        },
      ),
    );
    filter();
  }

  function filter() {
    const rows = [...results.querySelectorAll("tbody tr[data-offset]")];
    const wanted = search.value.trim().toLowerCase();
    let count = 0;
    for (const row of rows) {
      row.hidden = Boolean(wanted) && !row.dataset.search.includes(wanted);
      if (!row.hidden) count++;
    }
    matches.textContent = wanted ? `${count} of ${rows.length} records in this page match` : "";
  }

  return {
    element,
    async show(query) {
      if (query.has("partition")) {
        await fillPartitions().catch(() => null);
        partition.value = query.get("partition");
        from.value = "offset";
        offset.value = query.get("offset") || 0;
        syncFrom();
        load({ offset: Number(offset.value) });
      } else if (!shown) {
        load();
      }
    },
    close() {
      loading?.abort();
    },
  };
}

// Up to ``count`` records from ``offset`` in ``format`` ("auto": read as binary; a page of
// schema-registry records is read again in their schema's format): {records, end, format, note}.
async function readPage(topic, partition, offset, count, format, signal) {
  const readFormat = format === "auto" ? "binary" : format;
  const page = await readRecords(topic, partition, offset, count, readFormat, signal);
  if (format !== "auto") return { ...page, format };
  const ids = new Set();
  for (const r of page.records) for (const part of [r.key, r.value]) {
    const d = describe(part, "binary");
    if (d.kind === "schema") ids.add(d.schemaId);
  }
  if (!ids.size) return { ...page, format: "binary" };
  const formats = new Set(await Promise.all([...ids].map(schemaFormat)));
  if (formats.size !== 1 || formats.has(null)) {
    return { ...page, format: "binary", note: "The records name schemas of several types: pick a format to decode them." };
  }
  const [detected] = formats;
  try {
    const decoded = await readRecords(topic, partition, offset, count, detected, signal);
    return { ...decoded, format: detected, note: `Decoded as ${detected} (detected)` };
  } catch (error) {
    if (error.name === "AbortError" || !(error instanceof ApiError)) throw error;
    return { ...page, format: "binary", note: `Shown as bytes: ${error.message}` };
  }
}

async function readRecords(topic, partition, offset, count, format, signal) {
  const records = [];
  let next = offset;
  let end = offset;
  for (let i = 0; i < MAX_READS && records.length < count; i++) {
    const read = await readPartition(topic, partition, next, { format, maxBytes: READ_BYTES, signal });
    end = read.high_watermark;
    records.push(...read.records);
    if (!read.records.length || read.next_offset >= end) break;
    next = read.next_offset;
  }
  return { records: records.slice(0, count), end };
}

async function schemaFormat(id) {
  if (!schemaTypes.has(id)) {
    try {
      const schema = await get(`/schema-registry/schemas/ids/${id}`);
      schemaTypes.set(id, SCHEMA_TYPE_FORMATS[schema.schemaType || "AVRO"] || null);
    } catch {
      return null;
    }
  }
  return schemaTypes.get(id);
}

// The first offset of ``partition`` whose record's timestamp is at or after ``at`` (``end`` if
// none): a binary search over offsets, one one-record read a step (about 20 reads for a million
// records). Exact when timestamps grow with offsets, as log-append times do.
export async function offsetForTime(topic, partition, at, begin, end) {
  let low = begin;
  let high = end;
  while (low < high) {
    const middle = Math.floor((low + high) / 2);
    const read = await readPartition(topic, partition, middle, { format: "binary", maxBytes: 1 });
    const record = read.records[0];
    if (!record || record.timestamp >= at) high = middle;
    else low = record.offset + 1;
  }
  return low;
}
