// Push subscriptions: the list (endpoint, topics, backlog, whether this replica delivers it, the
// last error), and a subscription's page: its spec and its status (delivered, rate, failures,
// dead letters, in flight, the last error), refreshed every few seconds, with pause and resume.

import { call, enc, errorText, get, v3 } from "./api.js";
import { formatNumber } from "./decode.js";
import { clear, h, nothingListed, notice, readOnly, table } from "./dom.js";

const REFRESH_MS = 5000;

function topicsOf(s) {
  return s.topics ? s.topics.join(", ") : `pattern ${s.topic_pattern}`;
}

export function pushPage() {
  const status = h("div");
  const list = h("div", { class: "panel" });
  const element = h(
    "section",
    { class: "page", id: "push-page" },
    h("div", { class: "head" }, h("h1", { text: "Push subscriptions" }), h("button", { type: "button", onclick: () => load(), text: "Refresh" })),
    status,
    list,
  );

  async function load() {
    let subs;
    try {
      subs = (await get(await v3("/push-subscriptions"))).data;
    } catch (error) {
      notice(status, errorText(error), "error");
      return;
    }
    notice(status, "");
    clear(list).append(
      table(
        [
          { title: "Subscription", cell: (s) => h("a", { href: `#/push/${enc(s.name)}`, text: s.name }) },
          { title: "Endpoint", cell: (s) => s.endpoint },
          { title: "Topics", cell: (s) => topicsOf(s) },
          { title: "State", cell: (s) => (s.paused ? "paused" : "active") },
          { title: "Backlog", class: "num", cell: (s) => formatNumber(s.status.backlog) },
          { title: "Last error", cell: (s) => s.status.last_error || "" },
        ],
        subs,
        { empty: nothingListed("push subscriptions"), rowProps: (s) => ({ data: { subscription: s.name } }) },
      ),
    );
  }

  return { element, update: () => load(), close() {} };
}

export function pushSubscriptionPage(name) {
  const status = h("div");
  const about = h("p", { class: "muted", id: "push-about" });
  const spec = h("div", { class: "panel", id: "push-spec" });
  const figures = h("div", { class: "panel", id: "push-status" });
  const toggle = h("button", { type: "button", name: "toggle", onclick: () => flip() });
  let timer = null;
  let paused = false;

  const element = h(
    "section",
    { class: "page", id: "push-subscription-page", data: { subscription: name } },
    h(
      "div",
      { class: "head" },
      h("h1", {}, h("a", { href: "#/push", class: "muted", text: "Push subscriptions" }), " / ", name),
      readOnly() ? "" : toggle,
      h("button", { type: "button", name: "refresh", onclick: () => load(), text: "Refresh" }),
    ),
    status,
    about,
    h("h2", { text: "Status" }),
    figures,
    h("h2", { text: "Spec" }),
    spec,
  );

  async function flip() {
    try {
      await call("POST", await v3(`/push-subscriptions/${enc(name)}/${paused ? "resume" : "pause"}`));
    } catch (error) {
      notice(status, errorText(error), "error");
      return;
    }
    load();
  }

  async function load() {
    let s;
    try {
      s = await get(await v3(`/push-subscriptions/${enc(name)}`));
    } catch (error) {
      notice(status, errorText(error), "error");
      return;
    }
    notice(status, "");
    paused = s.paused;
    toggle.textContent = paused ? "Resume" : "Pause";
    const st = s.status;
    about.textContent = `${paused ? "Paused" : "Active"}, ${st.delivering ? "delivered from this replica" : "delivered from another replica (or none yet)"}, backlog ${formatNumber(st.backlog)} (refreshed every ${REFRESH_MS / 1000} s)`;
    const shown = (v) => (v === null || v === undefined ? "—" : formatNumber(v)); // the API's decimals are exact numbers
    const rows = [
      ["Backlog", st.backlog],
      ["Held", st.held],
      ["Delivered", st.delivered],
      ["Delivery rate (records/s)", st.delivery_rate],
      ["Requests", st.requests],
      ["Failures", st.failures],
      ["Dead-lettered", st.dead_lettered],
      ["In flight", st.in_flight],
      ["Last status", st.last_status],
      ["Last error", st.last_error],
    ];
    clear(figures).append(table([{ title: "Figure", cell: (r) => r[0] }, { title: "Value", class: "num", cell: (r) => shown(r[1]) }], rows));
    const specRows = [
      ["Endpoint", s.endpoint],
      ["Topics", topicsOf(s)],
      ["Format", s.format],
      ["Ordering", s.ordering],
      ["Batching", `${s.batching.max_records} records, ${s.batching.max_bytes} bytes`],
      ["In flight at most", s.max_in_flight],
      ["Deadline (ms)", s.ack_deadline_ms],
      ["Retry", `${s.retry.min_backoff_ms}–${s.retry.max_backoff_ms} ms, ${s.retry.max_attempts} attempts`],
      ["Dead-letter topic", s.dead_letter_topic],
      ["Authentication", s.authentication.type],
      ["Owner", s.owner],
    ];
    clear(spec).append(table([{ title: "Field", cell: (r) => r[0] }, { title: "Value", cell: (r) => shown(r[1]) }], specRows));
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
