// Topics: the list (with a create form), and a topic's page: its partitions with their offsets,
// then the record browser, the produce form and the live tail as tabs.

import { call, enc, errorText, get, partitions, v3 } from "./api.js";
import { formatNumber } from "./decode.js";
import { clear, field, h, nothingListed, notice, readOnly, reservedReason, table } from "./dom.js";
import { produceForm } from "./produce.js";
import { recordBrowser } from "./records.js";
import { liveTail } from "./tail.js";

const SUMMED_TOPICS = 50; // topics whose partitions the list asks for, to count their records

export function topicsPage() {
  const status = h("div");
  const list = h("div", { class: "panel" });
  const element = h(
    "section",
    { class: "page", id: "topics-page" },
    h("div", { class: "head" }, h("h1", { text: "Topics" }), h("button", { type: "button", onclick: () => load(), text: "Refresh" })),
    readOnly() ? null : createForm(status, () => load()),
    status,
    list,
  );

  async function load() {
    let topics;
    try {
      topics = (await get(await v3("/topics"))).data;
    } catch (error) {
      notice(status, errorText(error), "error");
      return;
    }
    topics.sort((a, b) => a.topic_name.localeCompare(b.topic_name));
    const counts = await Promise.all(
      topics.map((t, i) => (i < SUMMED_TOPICS ? partitions(t.topic_name).then(recordCount, () => null) : null)),
    );
    const rows = topics.map((t, i) => ({ ...t, records: counts[i] }));
    const columns = [
      { title: "Topic", cell: (t) => h("a", { href: `#/topics/${enc(t.topic_name)}`, text: t.topic_name }) },
      { title: "Partitions", class: "num", cell: (t) => formatNumber(t.partitions_count) },
      { title: "Replication", class: "num", cell: (t) => formatNumber(t.replication_factor) },
      { title: "Records", class: "num", cell: (t) => (t.records === null ? "" : formatNumber(t.records)) },
      { title: "Configs", cell: (t) => configText(t.configs) },
    ];
    if (!readOnly()) columns.push({ title: "", cell: (t) => deleteButton(t.topic_name, status, () => load()) });
    clear(list).append(table(columns, rows, { empty: nothingListed("topics"), rowProps: (t) => ({ data: { topic: t.topic_name } }) }));
    if (!readOnly()) {
      // why a Delete is disabled, said where it shows rather than in a tooltip only
      const refusals = rows.map((t) => reservedReason(t.topic_name)).filter(Boolean);
      list.append(...refusals.map((text) => h("p", { class: "muted note reserved", text })));
    }
  }

  return { element, update: () => load(), close() {} };
}

function recordCount(parts) {
  return parts.reduce((sum, p) => sum + (p.end_offset - p.beginning_offset), 0);
}

function configText(configs) {
  const entries = Array.isArray(configs) ? configs.map((c) => [c.name, c.value]) : Object.entries(configs || {});
  return entries.map(([name, value]) => `${name}=${value}`).join(", ");
}

function createForm(status, created) {
  const name = h("input", { name: "topic_name", required: true, pattern: "[a-zA-Z0-9._\\-]{1,249}", placeholder: "orders", autocomplete: "off" });
  const count = h("input", { name: "partitions_count", type: "number", min: 1, value: 1, required: true });
  const form = h(
    "form",
    { class: "inline panel write", id: "create-topic" },
    field("New topic", name),
    field("Partitions", count),
    h("button", { type: "submit", text: "Create topic" }),
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    try {
      await call("POST", await v3("/topics"), { body: { topic_name: name.value, partitions_count: Number(count.value) } });
      notice(status, `Created topic ${name.value}.`, "ok");
      form.reset();
      created();
    } catch (error) {
      notice(status, errorText(error), "error");
    }
  });
  return form;
}

function deleteButton(topic, status, deleted) {
  const refused = reservedReason(topic);
  if (refused) return h("button", { type: "button", class: "danger write", disabled: true, title: refused, "aria-label": `Delete: ${refused}`, text: "Delete" });
  return h("button", {
    type: "button",
    class: "danger write",
    text: "Delete",
    onclick: async () => {
      if (!confirm(`Delete topic ${topic} and every record in it?`)) return;
      try {
        await call("DELETE", await v3(`/topics/${enc(topic)}`));
        notice(status, `Deleted topic ${topic}.`, "ok");
        deleted();
      } catch (error) {
        notice(status, errorText(error), "error");
      }
    },
  });
}

const TABS = [
  ["records", "Records"],
  ["produce", "Produce"],
  ["tail", "Live tail"],
];

export function topicPage(topic) {
  const status = h("div");
  const refused = reservedReason(topic); // the API takes no delete and no record for it
  const summary = h("div", { class: "panel", id: "partitions" });
  let parts = [];
  let loaded = null;

  async function loadPartitions() {
    try {
      parts = await partitions(topic);
    } catch (error) {
      notice(status, errorText(error), "error");
      loaded = null; // asked again by the next tab that needs them
      return parts;
    }
    notice(status, "");
    clear(summary).append(
      table(
        [
          { title: "Partition", class: "num", cell: (p) => String(p.partition_id) },
          { title: "Leader", cell: (p) => p.leader.related.split("/").pop() },
          { title: "Replicas", cell: (p) => (p.replicas || []).join(", ") },
          { title: "Beginning offset", class: "num", cell: (p) => formatNumber(p.beginning_offset) },
          { title: "End offset", class: "num", cell: (p) => formatNumber(p.end_offset) },
          { title: "Records", class: "num", cell: (p) => formatNumber(p.end_offset - p.beginning_offset) },
          { title: "", cell: (p) => h("a", { href: `#/topics/${enc(topic)}/records?partition=${p.partition_id}&offset=${p.beginning_offset}`, text: "Browse" }) },
        ],
        parts,
        { rowProps: (p) => ({ data: { partition: p.partition_id } }) },
      ),
    );
    return parts;
  }

  // The partitions as last loaded (loaded once before any tab uses them).
  const getPartitions = () => (loaded ??= loadPartitions());
  const browser = recordBrowser(topic, getPartitions);
  const tail = liveTail(topic, getPartitions);
  const panels = {
    records: browser.element,
    produce: readOnly() || refused ? null : produceForm(topic, getPartitions, () => loadPartitions()).element,
    tail: tail.element,
  };
  const tabs = h(
    "nav",
    { class: "tabs", role: "tablist" },
    TABS.filter(([key]) => panels[key]).map(([key, title]) =>
      h("a", { href: `#/topics/${enc(topic)}/${key}`, role: "tab", data: { tab: key }, class: key === "produce" ? "write" : null, text: title }),
    ),
  );
  const element = h(
    "section",
    { class: "page", id: "topic-page", data: { topic } },
    h(
      "div",
      { class: "head" },
      h("h1", {}, h("a", { href: "#/topics", class: "muted", text: "Topics" }), " / ", topic),
      h("button", { type: "button", onclick: () => loadPartitions(), text: "Refresh" }),
    ),
    refused && h("p", { class: "notice info", id: "reserved", text: refused }),
    status,
    summary,
    tabs,
    Object.values(panels).filter(Boolean),
  );

  function update(route) {
    getPartitions();
    let tab = route.parts[2] || "records";
    if (!panels[tab]) tab = "records";
    for (const [key, panel] of Object.entries(panels)) if (panel) panel.hidden = key !== tab;
    for (const link of tabs.children) link.setAttribute("aria-selected", String(link.dataset.tab === tab));
    if (tab === "records") browser.show(route.query);
  }

  return {
    element,
    update,
    close() {
      tail.close();
      browser.close();
    },
  };
}
