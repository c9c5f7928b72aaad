// Consumer groups: the list with their lag, and a group's page: members, assignments, committed
// offsets and lag per partition, and a chart of its total lag over time.
//
// The chart shows samples this page took of the v3 lag endpoint while it was open (the gateway
// keeps no history: replicas would each hold their own, and it would cost memory for groups no
// one looks at). Samples of a group are kept while the console stays open in this tab.

import { enc, errorText, get, v3 } from "./api.js";
import { lineChart } from "./chart.js";
import { formatNumber } from "./decode.js";
import { clear, field, h, notice, select, table } from "./dom.js";

const SUMMARIZED_GROUPS = 100; // groups whose lag the list asks for
const MAX_SAMPLES = 720; // per group: an hour at the default interval
const INTERVALS = [
  [2000, "2 s"],
  [5000, "5 s"],
  [15000, "15 s"],
  [60000, "1 min"],
];
const history = new Map(); // group -> [{t, value}] taken since the page opened
let interval = 5000;

export function groupsPage() {
  const status = h("div");
  const list = h("div", { class: "panel" });
  const element = h(
    "section",
    { class: "page", id: "groups-page" },
    h("div", { class: "head" }, h("h1", { text: "Consumer groups" }), h("button", { type: "button", onclick: () => load(), text: "Refresh" })),
    status,
    list,
  );

  async function load() {
    let groups;
    try {
      groups = (await get(await v3("/consumer-groups"))).data;
    } catch (error) {
      notice(status, errorText(error), "error");
      return;
    }
    const summaries = await Promise.all(
      groups.map((g, i) =>
        i < SUMMARIZED_GROUPS ? v3(`/consumer-groups/${enc(g.consumer_group_id)}/lag-summary`).then(get).catch(() => null) : null,
      ),
    );
    notice(status, "");
    clear(list).append(
      table(
        [
          { title: "Group", cell: (g) => h("a", { href: `#/groups/${enc(g.consumer_group_id)}`, text: g.consumer_group_id }) },
          { title: "State", cell: (g) => g.state },
          { title: "Members", class: "num", cell: (g) => String(g.consumers.length) },
          { title: "Assignor", cell: (g) => g.partition_assignor || "" },
          { title: "Generation", class: "num", cell: (g) => String(g.generation) },
          { title: "Total lag", class: "num", cell: (g) => (g.summary ? formatNumber(g.summary.total_lag) : "") },
          { title: "Max lag", class: "num", cell: (g) => (g.summary ? formatNumber(g.summary.max_lag) : "") },
        ],
        groups.map((g, i) => ({ ...g, summary: summaries[i] })),
        { empty: "No consumer groups yet.", rowProps: (g) => ({ data: { group: g.consumer_group_id } }) },
      ),
    );
  }

  return { element, update: () => load(), close() {} };
}

export function groupPage(group) {
  const status = h("div");
  const about = h("p", { class: "muted", id: "group-about" });
  const members = h("div", { class: "panel", id: "members" });
  const lags = h("div", { class: "panel", id: "lags" });
  const chart = h("div", { class: "panel", id: "lag-chart" });
  const every = select("interval", INTERVALS, interval);
  const samples = history.get(group) || [];
  history.set(group, samples);
  let timer = null;

  every.addEventListener("change", () => {
    interval = Number(every.value);
    schedule();
  });

  const element = h(
    "section",
    { class: "page", id: "group-page", data: { group } },
    h(
      "div",
      { class: "head" },
      h("h1", {}, h("a", { href: "#/groups", class: "muted", text: "Consumer groups" }), " / ", group),
      field("Sample every", every),
      h("button", { type: "button", name: "refresh", onclick: () => sample(), text: "Refresh" }),
    ),
    status,
    about,
    h("h2", { text: "Members and assignments" }),
    members,
    h("h2", { text: "Committed offsets and lag" }),
    lags,
    h("h2", { text: "Lag over time" }),
    chart,
  );

  async function sample() {
    let description, lagRows;
    try {
      [description, lagRows] = await Promise.all([get(await v3(`/consumer-groups/${enc(group)}`)), get(await v3(`/consumer-groups/${enc(group)}/lags`))]);
    } catch (error) {
      notice(status, errorText(error), "error");
      return;
    }
    notice(status, "");
    lagRows = lagRows.data;
    const total = lagRows.reduce((sum, row) => sum + row.lag, 0);
    samples.push({ t: Date.now(), value: total });
    if (samples.length > MAX_SAMPLES) samples.splice(0, samples.length - MAX_SAMPLES);
    about.textContent = `${description.state}, generation ${description.generation}, assignor ${description.partition_assignor || "none"}, total lag ${formatNumber(total)}`;
    showMembers(description.consumers);
    showLags(lagRows);
    showChart();
  }

  function showMembers(consumers) {
    clear(members).append(
      table(
        [
          { title: "Member", cell: (c) => c.consumer_id },
          { title: "Subscription", cell: (c) => (c.topic_pattern ? `pattern ${c.topic_pattern}: ` : "") + c.subscription.join(", ") },
          { title: "Assigned partitions", cell: (c) => c.assignments.map((a) => `${a.topic_name}/${a.partition_id}`).join(", ") || "none" },
        ],
        consumers,
        { empty: "No members: nothing reads for this group now." },
      ),
    );
  }

  function showLags(rows) {
    rows.sort((a, b) => a.topic_name.localeCompare(b.topic_name) || a.partition_id - b.partition_id);
    clear(lags).append(
      table(
        [
          { title: "Topic", cell: (r) => h("a", { href: `#/topics/${enc(r.topic_name)}`, text: r.topic_name }) },
          { title: "Partition", class: "num", cell: (r) => String(r.partition_id) },
          { title: "Committed offset", class: "num", cell: (r) => (r.current_offset < 0 ? "none" : formatNumber(r.current_offset)) },
          { title: "End offset", class: "num", cell: (r) => formatNumber(r.log_end_offset) },
          { title: "Lag", class: "num lag", cell: (r) => formatNumber(r.lag) },
          { title: "Owner", cell: (r) => r.consumer_id || "" },
        ],
        rows,
        { empty: "No committed offsets or assigned partitions.", rowProps: (r) => ({ data: { topic: r.topic_name, partition: r.partition_id } }) },
      ),
    );
  }

  function showChart() {
    const seconds = interval / 1000;
    clear(chart).append(
      lineChart(samples, "total lag"),
      h("p", { class: "muted", id: "chart-caption", text: `Total lag: a sample every ${seconds} s and at each refresh, since this page opened (${samples.length} samples; the gateway keeps no history).` }),
    );
  }

  function schedule() {
    clearInterval(timer);
    timer = setInterval(sample, interval);
  }

  return {
    element,
    update() {
      sample();
      schedule();
    },
    close() {
      clearInterval(timer);
    },
  };
}
