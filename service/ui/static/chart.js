// A line chart of samples over time, drawn as SVG (points carry a tooltip), as wide as it is
// given: drawn at the width it is shown at, so it fills its card and its text keeps its size.

const SVG = "http://www.w3.org/2000/svg";
const WIDTH = 720; // when the width it is shown at is not known
const HEIGHT = 240;
const PAD = { left: 56, right: 16, top: 12, bottom: 28 };

function s(tag, attrs = {}, text) {
  const el = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attrs)) el.setAttribute(name, String(value));
  if (text !== undefined) el.textContent = text;
  return el;
}

// A round number at or above ``n`` for the top of the axis (1, 2 or 5 times a power of ten).
function ceiling(n) {
  if (n <= 0) return 1;
  const power = 10 ** Math.floor(Math.log10(n));
  return [1, 2, 5, 10].map((m) => m * power).find((v) => v >= n);
}

const clock = (t) => new Date(t).toISOString().slice(11, 19) + " UTC";

// ``samples``: [{t: epoch millis, value}], oldest first; ``label`` names the value; ``width``, in
// CSS pixels.
export function lineChart(samples, label, width = WIDTH) {
  // As tall whatever its width: a height that followed the width could give the page a scroll
  // bar, which narrows the card, which redraws the chart shorter, which takes the bar away...
  const svg = s("svg", { viewBox: `0 0 ${width} ${HEIGHT}`, height: HEIGHT, class: "chart", role: "img", "aria-label": label });
  const innerW = width - PAD.left - PAD.right;
  const innerH = HEIGHT - PAD.top - PAD.bottom;
  const top = ceiling(Math.max(0, ...samples.map((p) => p.value)));
  const first = samples.length ? samples[0].t : 0;
  const span = samples.length > 1 ? samples[samples.length - 1].t - first : 1;
  const x = (t) => PAD.left + ((t - first) / span) * innerW;
  const y = (v) => PAD.top + innerH - (v / top) * innerH;
  for (const v of [0, top / 2, top]) {
    svg.append(s("line", { x1: PAD.left, x2: width - PAD.right, y1: y(v), y2: y(v), class: "grid" }));
    svg.append(s("text", { x: PAD.left - 6, y: y(v) + 4, "text-anchor": "end", class: "tick" }, v.toLocaleString("en-US")));
  }
  if (samples.length) {
    svg.append(s("text", { x: PAD.left, y: HEIGHT - 8, class: "tick" }, clock(first)));
    svg.append(s("text", { x: width - PAD.right, y: HEIGHT - 8, "text-anchor": "end", class: "tick" }, clock(first + span)));
  }
  if (samples.length > 1) {
    svg.append(s("polyline", { class: "line", points: samples.map((p) => `${x(p.t).toFixed(1)},${y(p.value).toFixed(1)}`).join(" ") }));
  }
  for (const p of samples) {
    const dot = s("circle", { cx: x(p.t), cy: y(p.value), r: samples.length > 60 ? 1.5 : 3, class: "dot" });
    dot.append(s("title", {}, `${clock(p.t)}: ${label} ${p.value.toLocaleString("en-US")}`));
    svg.append(dot);
  }
  return svg;
}
