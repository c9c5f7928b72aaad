// The live tail: one EventSource per partition on the gateway's record stream
// (GET /topics/<t>/partitions/<p>/records with Accept: text/event-stream), newest first.
//
// A browser opens about six HTTP/1.1 connections to one gateway and each stream holds one, so
// the tail follows at most MAX_STREAMS partitions at once (the first ones, or those picked),
// leaving connections for the rest of the console.

import { FORMATS, enc, errorText, partitionOffsets, url } from "./api.js";
import { describe, formatNumber, formatTime, headerLines, parseExact } from "./decode.js";
import { clear, field, h, notice, select } from "./dom.js";

export const MAX_STREAMS = 4;
const MAX_ROWS = 500; // rows kept on the page, the oldest dropped first
const RETRY_MS = 2000;
const MAX_RETRY_MS = 30000;
// The columns, their widths set by the style sheet (a fixed layout: the columns keep their widths
// whether the table is empty or rows arrive).
const COLUMNS = [
  ["partition", "Partition"],
  ["offset", "Offset"],
  ["timestamp", "Timestamp"],
  ["key", "Key"],
  ["headers", "Headers"],
  ["value", "Value"],
];
const NUMERIC = new Set(["partition", "offset"]);
const IDLE = "No records yet: Start follows the partitions picked.";
const WAITING = "No records yet: waiting for new ones.";

export function liveTail(topic, getPartitions) {
  const format = select("format", [["auto", "auto-detect"], ...FORMATS.map((f) => [f, f])], "auto");
  const start = select("start", [["end", "new records"], ["beginning", "the beginning"]], "end");
  const picks = h("span", { class: "picks" });
  const toggle = h("button", { type: "submit", name: "toggle", text: "Start" });
  const status = h("div");
  const streams = h("ul", { class: "streams muted" });
  const waiting = h("td", { class: "muted", colspan: COLUMNS.length, text: IDLE });
  const empty = h("tr", { class: "empty" }, waiting);
  const body = h("tbody", {}, empty);
  const rows = h(
    "table",
    { id: "tail", class: "fixed" },
    h("colgroup", {}, COLUMNS.map(([name]) => h("col", { class: `col-${name}` }))),
    h("thead", {}, h("tr", {}, COLUMNS.map(([name, title]) => h("th", { class: NUMERIC.has(name) ? "num" : null, text: title })))),
    body,
  );
  const form = h(
    "form",
    { class: "inline", id: "tail-form" },
    field("Format", format),
    field("From", start),
    field("Partitions", picks),
    toggle,
    h("button", { type: "button", text: "Clear", onclick: () => clear(body).append(empty) }),
  );
  const element = h("div", { class: "panel", id: "tail-panel", role: "tabpanel" }, form, status, streams, rows);
  let running = []; // one {partition, source, next, timer, line} per followed partition

  getPartitions().then((parts) => {
    picks.append(
      ...parts.map((p, i) =>
        h("label", { class: "pick" }, h("input", { type: "checkbox", name: "partition", value: p.partition_id, checked: i < MAX_STREAMS }), ` ${p.partition_id}`),
      ),
    );
  });

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    if (running.length) stop();
    else begin();
  });

  async function begin() {
    const chosen = [...picks.querySelectorAll("input:checked")].map((input) => Number(input.value));
    if (!chosen.length) return notice(status, "Pick a partition to follow.", "error");
    if (chosen.length > MAX_STREAMS) return notice(status, `Follow at most ${MAX_STREAMS} partitions at once.`, "error");
    notice(status, "");
    waiting.textContent = WAITING;
    toggle.textContent = "Stop";
    for (const input of form.elements) if (input !== toggle && input.type !== "button") input.disabled = true;
    const offsets = await Promise.all(chosen.map((p) => partitionOffsets(topic, p).catch(() => ({ beginning_offset: 0, end_offset: 0 }))));
    chosen.forEach((partition, i) => {
      const from = start.value === "end" ? offsets[i].end_offset : offsets[i].beginning_offset;
      const stream = { partition, next: from, source: null, timer: null, line: h("li") };
      streams.append(stream.line);
      running.push(stream);
      open(stream);
    });
  }

  function open(stream) {
    const fmt = format.value === "auto" ? "binary" : format.value;
    const path = `/topics/${enc(topic)}/partitions/${stream.partition}/records`;
    const source = new EventSource(url(path, { offset: stream.next, format: fmt }));
    stream.source = source;
    stream.line.textContent = `partition ${stream.partition}: connecting at offset ${formatNumber(stream.next)}`;
    source.addEventListener("open", () => {
      stream.delay = 0;
      stream.line.textContent = `partition ${stream.partition}: live from offset ${formatNumber(stream.next)}`;
    });
    source.addEventListener("records", (event) => {
      const records = parseExact(event.data);
      for (const record of records) show(record, fmt);
      const cursor = /^\d+$/.test(event.lastEventId) ? Number(event.lastEventId) : NaN; // its next offset
      if (Number.isSafeInteger(cursor)) stream.next = cursor;
      else if (records.length) stream.next = records[records.length - 1].offset + 1;
      stream.line.textContent = `partition ${stream.partition}: live, next offset ${formatNumber(stream.next)}`;
    });
    source.addEventListener("end", (event) => {
      source.close();
      let end = {};
      try {
        end = JSON.parse(event.data);
      } catch {
        end = { reason: String(event.data) };
      }
      // "shutdown", or an error the gateway would retry (503: a limit of its own, such as the
      // stream's lifetime): follow on from the next offset, through any replica. Any other
      // error ends the tail of that partition, saying why.
      const again = end.reason !== "error" || String(end.error_code).startsWith("503");
      const why = end.message ? `${end.reason}: ${end.message}` : end.reason;
      const at = `at offset ${formatNumber(stream.next)}`;
      stream.line.textContent = `partition ${stream.partition}: ended (${why}) ${at}${again ? ", reopening" : ""}`;
      if (again) stream.timer = setTimeout(() => open(stream), RETRY_MS);
    });
    source.addEventListener("error", async () => {
      // Reopened by the tail itself, from the next offset it has not shown: never a record twice.
      const refused = source.readyState === EventSource.CLOSED; // an HTTP error, not a lost connection
      source.close();
      if (!running.includes(stream)) return;
      if (refused) {
        try {
          await partitionOffsets(topic, stream.partition); // says why, if the API refuses
        } catch (error) {
          stream.line.textContent = `partition ${stream.partition}: ${errorText(error)}`;
          return;
        }
      }
      stream.delay = Math.min((stream.delay || RETRY_MS / 2) * 2, MAX_RETRY_MS);
      stream.line.textContent = `partition ${stream.partition}: disconnected, retrying from offset ${formatNumber(stream.next)} in ${stream.delay / 1000} s`;
      stream.timer = setTimeout(() => open(stream), stream.delay);
    });
  }

  function show(record, fmt) {
    const key = describe(record.key, fmt);
    const value = describe(record.value, fmt);
    empty.remove();
    body.prepend(
      h(
        "tr",
        { data: { partition: record.partition, offset: record.offset } },
        h("td", { class: "num", text: String(record.partition) }),
        h("td", { class: "num", text: formatNumber(record.offset) }),
        h("td", { class: "time", text: formatTime(record.timestamp) }),
        h("td", {}, h("pre", { class: `value ${key.kind}`, text: key.text })),
        h("td", {}, h("pre", { class: "headers", text: headerLines(record.headers).join("\n") })),
        h("td", {}, h("pre", { class: `value ${value.kind}`, text: value.text })),
      ),
    );
    while (body.rows.length > MAX_ROWS) body.lastElementChild.remove();
  }

  function stop() {
    for (const stream of running) {
      stream.source?.close();
      clearTimeout(stream.timer);
    }
    running = [];
    waiting.textContent = IDLE;
    clear(streams);
    toggle.textContent = "Start";
    for (const input of form.elements) input.disabled = false;
  }

  return { element, close: stop };
}
