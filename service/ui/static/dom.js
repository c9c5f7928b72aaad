// Building the page: elements from data, never from HTML strings, so nothing a record holds can
// become markup or script.

export function h(tag, props = {}, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(props)) {
    if (value === undefined || value === null || value === false) continue;
    if (name === "class") el.className = value;
    else if (name === "text") el.textContent = value;
    else if (name === "data") Object.assign(el.dataset, value);
    else if (name.startsWith("on")) el.addEventListener(name.slice(2), value);
    else if (value === true) el.setAttribute(name, "");
    else el.setAttribute(name, String(value));
  }
  append(el, children);
  return el;
}

export function append(el, children) {
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

export function clear(el) {
  el.replaceChildren();
  return el;
}

// A table of ``rows`` (objects) under ``columns``: [{title, cell(row) -> Node|string, class}].
export function table(columns, rows, { empty = "Nothing yet.", rowProps } = {}) {
  const body = h("tbody");
  for (const row of rows) {
    const tr = h("tr", rowProps ? rowProps(row) : {});
    for (const column of columns) tr.append(h("td", { class: column.class }, column.cell(row)));
    body.append(tr);
  }
  if (!rows.length) body.append(h("tr", {}, h("td", { class: "muted", colspan: columns.length, text: empty })));
  return h(
    "table",
    {},
    h("thead", {}, h("tr", {}, columns.map((c) => h("th", { class: c.class, text: c.title })))),
    body,
  );
}

// A message above a panel's content: ``kind`` is "error", "ok" or "info".
export function notice(el, message, kind = "info") {
  clear(el);
  if (message) el.append(h("p", { class: `notice ${kind}`, role: kind === "error" ? "alert" : "status", text: message }));
}

export function field(label, control, hint) {
  return h("label", { class: "field" }, h("span", { class: "label", text: label }), control, hint && h("small", { class: "muted", text: hint }));
}

export function select(name, options, value) {
  return h(
    "select",
    { name },
    options.map(([optionValue, text]) => h("option", { value: optionValue, selected: String(optionValue) === String(value), text })),
  );
}

export function readOnly() {
  return document.body.dataset.readOnly === "true";
}

// What the gateway wrote into the page about the request that loaded it (see the console's router).
export function viewer() {
  const data = document.body.dataset;
  let reserved = {};
  try {
    reserved = JSON.parse(data.reserved || "{}");
  } catch {
    reserved = {};
  }
  return { principal: data.principal || "", authenticated: data.authenticated === "true", filtered: data.filtered === "true", reserved };
}

// What an empty listing of ``things`` says: with the ACLs deciding, there may be some this
// principal is not allowed to see.
export function nothingListed(things) {
  const { principal, filtered } = viewer();
  if (!filtered) return `No ${things} yet.`;
  return `No ${things} you may see: there may be ${things} that ${principal} is not allowed to describe.`;
}

// Why the API refuses to delete or produce to ``topic`` (one the gateway keeps for itself), or null.
export function reservedReason(topic) {
  const { reserved } = viewer();
  const owner = Object.hasOwn(reserved, topic) ? reserved[topic] : null;
  return owner === null ? null : `${topic} holds ${owner}: the gateway refuses to delete it or produce to it.`;
}
