// The console's pages by the URL's fragment: #/topics, #/topics/<t>/<tab>, #/groups, #/groups/<g>,
// #/share-groups, #/share-groups/<g>, #/push, #/push/<subscription>.
// A page is ``{key, update(route), close()}``: moving within a page (a topic's tabs) updates it,
// so a live tail keeps running; leaving it closes it (its streams and timers end).

import { get } from "./api.js";
import { clear, viewer } from "./dom.js";
import { groupPage, groupsPage } from "./groups.js";
import { pushPage, pushSubscriptionPage } from "./push.js";
import { shareGroupPage, shareGroupsPage } from "./shares.js";
import { topicPage, topicsPage } from "./topics.js";

const view = document.getElementById("view");
let page = null;

export function parseRoute(hash) {
  const [path, search = ""] = hash.replace(/^#/, "").split("?", 2);
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  return { parts, query: new URLSearchParams(search) };
}

function pageFor(route) {
  const [section, name] = route.parts;
  if (section === "groups" && name !== undefined) return { key: `group:${name}`, open: () => groupPage(name) };
  if (section === "groups") return { key: "groups", open: () => groupsPage() };
  if (section === "share-groups" && name !== undefined) return { key: `share-group:${name}`, open: () => shareGroupPage(name) };
  if (section === "share-groups") return { key: "share-groups", open: () => shareGroupsPage() };
  if (section === "push" && name !== undefined) return { key: `push:${name}`, open: () => pushSubscriptionPage(name) };
  if (section === "push") return { key: "push", open: () => pushPage() };
  if (section === "topics" && name !== undefined) return { key: `topic:${name}`, open: () => topicPage(name) };
  return { key: "topics", open: () => topicsPage() };
}

function show() {
  const route = parseRoute(location.hash);
  const wanted = pageFor(route);
  for (const link of document.querySelectorAll("[data-nav]")) {
    link.classList.toggle("active", link.dataset.nav === (route.parts[0] || "topics"));
  }
  if (page && page.key === wanted.key) {
    page.update(route);
    return;
  }
  if (page) page.close();
  page = { key: wanted.key, ...wanted.open() };
  clear(view).append(page.element);
  page.update(route);
}

async function showCluster() {
  const where = document.getElementById("cluster");
  try {
    const clusters = await get("/v3/clusters");
    where.textContent = `cluster ${clusters.data[0].cluster_id}`;
  } catch {
    where.textContent = ""; // the page says what went wrong with its own calls
  }
}

// Who the gateway took the browser for: every call the page makes is that principal's.
function showPrincipal() {
  const { principal, authenticated } = viewer();
  const where = document.getElementById("principal");
  where.textContent = authenticated ? `signed in as ${principal}` : `${principal} (authentication off)`;
  where.title = authenticated
    ? "The principal the gateway authenticated this browser as; the console shows and does what its ACLs allow."
    : "The gateway authenticates no one: every caller is this principal.";
}

window.addEventListener("hashchange", show);
if (!location.hash) history.replaceState(null, "", "#/topics");
showPrincipal();
show();
showCluster();
