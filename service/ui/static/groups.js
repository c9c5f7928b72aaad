// Consumer groups: the list with their lag, and a group's page: members, assignments, committed
// offsets and lag per partition, and a chart of its total lag over time.
//
// The chart shows samples this page took of the v3 lag endpoint while it was open (the gateway
// keeps no history: replicas would each hold their own, and it would cost memory for groups no
// one looks at). Samples of a group are kept while the console stays open in this tab.
//
// A member's subscription as the v3 description has it names the existing topics it covers; the
// topics it names that do not exist (a typo polls nothing, for ever) are in the instance's own
// v2 subscription (``missing_topics``), which the page asks once per member and change of the
// group (any call on an instance renews its lease: the page must not keep members alive). Only
// the instance's creator may read it; for the others the page shows what v3 says.

import { enc, errorText, get, v3 } from "./api.js";
import { lineChart } from "./chart.js";
import { formatNumber } from "./decode.js";
import { clear, field, h, nothingListed, notice, select, table } from "./dom.js";

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
        { empty: nothingListed("consumer groups"), rowProps: (g) => ({ data: { group: g.consumer_group_id } }) },
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
  const subscriptions = new Map(); // member and what v3 says of it -> its v2 subscription, or null
  let membersShown = 0; // the members' table shown last, of those asked for
  let drawn = 0; // the width the chart was drawn for
  const resized = new ResizeObserver(() => {
    if (samples.length && chartWidth() !== drawn) showChart();
  });
  resized.observe(chart);

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
      h("button", { type: "button", name: "refresh", onclick: () => refresh(), text: "Refresh" }),
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
    showMembers(description.consumers, description.generation);
    showLags(lagRows);
    showChart();
  }

  function refresh() {
    subscriptions.clear(); // asked again: the user asked for what is now
    sample();
  }

  // The member's v2 subscription (its topics as subscribed, ``missing_topics`` those that do not
  // exist), asked once per member and state of the group; null when the caller may not read it.
  function subscriptionOf(consumer, generation) {
    if (consumer.topic_pattern) return Promise.resolve(null); // a pattern covers what exists
    const key = subscriptionKey(consumer, generation);
    if (!subscriptions.has(key)) {
      const path = `/consumers/${enc(group)}/instances/${enc(consumer.consumer_id)}/subscription`;
      subscriptions.set(key, get(path).catch(() => null));
    }
    return subscriptions.get(key);
  }

  function subscriptionKey(consumer, generation) {
    return JSON.stringify([consumer.consumer_id, generation, consumer.subscription]);
  }

  function subscriptionCell(consumer, subscribed) {
    if (consumer.topic_pattern) return `pattern ${consumer.topic_pattern}: ${consumer.subscription.join(", ")}`;
    const missing = new Set(subscribed?.missing_topics || []);
    const topics = subscribed ? subscribed.topics : consumer.subscription;
    return h(
      "span",
      { class: "subscription" },
      topics.flatMap((topic, i) => [
        i ? ", " : "",
        missing.has(topic) ? h("span", { class: "missing", title: "No topic of this name exists: the member reads nothing from it until one is created.", text: `${topic} (does not exist)` }) : topic,
      ]),
    );
  }

  async function showMembers(consumers, generation) {
    const mine = ++membersShown;
    const subscribed = await Promise.all(consumers.map((c) => subscriptionOf(c, generation)));
    if (mine !== membersShown) return; // a later sample shows them
    const current = new Set(consumers.map((c) => subscriptionKey(c, generation)));
    for (const key of subscriptions.keys()) if (!current.has(key)) subscriptions.delete(key);
    const rows = consumers.map((c, i) => ({ ...c, subscribed: subscribed[i] }));
    clear(members).append(
      table(
        [
          { title: "Member", cell: (c) => c.consumer_id },
          { title: "Subscription", cell: (c) => subscriptionCell(c, c.subscribed) },
          { title: "Assigned partitions", cell: (c) => c.assignments.map((a) => `${a.topic_name}/${a.partition_id}`).join(", ") || "none" },
        ],
        rows,
        { empty: "No members: nothing reads for this group now.", rowProps: (c) => ({ data: { member: c.consumer_id } }) },
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

  // The width of the chart's card inside its padding: the chart is drawn to fill it.
  function chartWidth() {
    const style = getComputedStyle(chart);
    return Math.floor(chart.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight));
  }

  function showChart() {
    const seconds = interval / 1000;
    const width = chartWidth();
    drawn = width;
    const count = samples.length === 1 ? "1 sample" : `${samples.length} samples`;
    clear(chart).append(
      lineChart(samples, "total lag", width > 0 ? Math.max(width, 240) : undefined),
      h("p", { class: "muted", id: "chart-caption", text: `Total lag: a sample every ${seconds} s and at each refresh, since this page opened (${count}; the gateway keeps no history).` }),
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
      resized.disconnect();
    },
  };
}
