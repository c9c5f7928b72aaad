// Share groups: the list with their consumers and lag, and a group's page: its consumers and, per
// partition, where the group stands (start and end offsets), the records in flight by state and
// the lag, refreshed every few seconds while the page is open.

import { enc, errorText, get, v3 } from "./api.js";
import { formatNumber } from "./decode.js";
import { clear, h, nothingListed, notice, table } from "./dom.js";

const REFRESH_MS = 5000;

export function shareGroupsPage() {
  const status = h("div");
  const list = h("div", { class: "panel" });
  const element = h(
    "section",
    { class: "page", id: "share-groups-page" },
    h("div", { class: "head" }, h("h1", { text: "Share groups" }), h("button", { type: "button", onclick: () => load(), text: "Refresh" })),
    status,
    list,
  );

  async function load() {
    let groups;
    try {
      groups = (await get(await v3("/share-groups"))).data;
    } catch (error) {
      notice(status, errorText(error), "error");
      return;
    }
    notice(status, "");
    clear(list).append(
      table(
        [
          { title: "Group", cell: (g) => h("a", { href: `#/share-groups/${enc(g.share_group_id)}`, text: g.share_group_id }) },
          { title: "State", cell: (g) => g.state },
          { title: "Consumers", class: "num", cell: (g) => String(g.consumers.length) },
          { title: "In flight", class: "num", cell: (g) => formatNumber(inFlight(g.partitions)) },
          { title: "Lag", class: "num", cell: (g) => formatNumber(g.lag) },
        ],
        groups,
        { empty: nothingListed("share groups"), rowProps: (g) => ({ data: { group: g.share_group_id } }) },
      ),
    );
  }

  return { element, update: () => load(), close() {} };
}

export function shareGroupPage(group) {
  const status = h("div");
  const about = h("p", { class: "muted", id: "share-group-about" });
  const consumers = h("div", { class: "panel", id: "share-consumers" });
  const partitions = h("div", { class: "panel", id: "share-partitions" });
  let timer = null;

  const element = h(
    "section",
    { class: "page", id: "share-group-page", data: { group } },
    h(
      "div",
      { class: "head" },
      h("h1", {}, h("a", { href: "#/share-groups", class: "muted", text: "Share groups" }), " / ", group),
      h("button", { type: "button", name: "refresh", onclick: () => load(), text: "Refresh" }),
    ),
    status,
    about,
    h("h2", { text: "Consumers" }),
    consumers,
    h("h2", { text: "Partitions" }),
    partitions,
  );

  async function load() {
    let described;
    try {
      described = await get(await v3(`/share-groups/${enc(group)}`));
    } catch (error) {
      notice(status, errorText(error), "error");
      return;
    }
    notice(status, "");
    about.textContent = `${described.state}, ${formatNumber(inFlight(described.partitions))} records in flight, lag ${formatNumber(described.lag)} (refreshed every ${REFRESH_MS / 1000} s)`;
    clear(consumers).append(
      table(
        [
          { title: "Consumer", cell: (c) => c.consumer_id },
          { title: "Subscription", cell: (c) => c.subscription.join(", ") },
        ],
        described.consumers,
        { empty: "No consumers: nothing reads for this group now." },
      ),
    );
    clear(partitions).append(
      table(
        [
          { title: "Topic", cell: (p) => h("a", { href: `#/topics/${enc(p.topic_name)}`, text: p.topic_name }) },
          { title: "Partition", class: "num", cell: (p) => String(p.partition_id) },
          { title: "Start offset", class: "num", cell: (p) => formatNumber(p.start_offset) },
          { title: "End offset", class: "num", cell: (p) => formatNumber(p.end_offset) },
          { title: "Available", class: "num", cell: (p) => formatNumber(p.available) },
          { title: "Acquired", class: "num acquired", cell: (p) => formatNumber(p.acquired) },
          { title: "Archiving", class: "num", cell: (p) => formatNumber(p.archiving) },
          { title: "Lag", class: "num lag", cell: (p) => formatNumber(p.lag) },
        ],
        described.partitions,
        { empty: "The group has read nothing yet.", rowProps: (p) => ({ data: { topic: p.topic_name, partition: p.partition_id } }) },
      ),
    );
  }

  return {
    element,
    update() {
      load();
      clearInterval(timer);
      timer = setInterval(load, REFRESH_MS);
    },
    close() {
      clearInterval(timer);
    },
  };
}

function inFlight(partitions) {
  return partitions.reduce((sum, p) => sum + p.available + p.acquired + p.archiving, 0);
}
