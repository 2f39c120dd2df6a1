// A line chart drawn in the page as SVG (no library, nothing fetched): one metric over runs,
// oldest on the left, each labelled under the axis with its date (a few of them when there
// are many, so they do not overlap). Each point carries its value (data-value) and a <title> for people who
// hover or use a screen reader; the runs table beside it holds the same numbers.

const SVG = "http://www.w3.org/2000/svg";
const WIDTH = 640;
const HEIGHT = 240;
const PAD = { left: 48, right: 40, top: 16, bottom: 36 };
const AXIS_LABELS = 5; // at most this many labels under the axis
const FONT_PX = 11; // the text's size on screen, whatever the chart's width
const LABEL_PX = 100; // screen pixels each label under the axis needs

function node(tag, attrs = {}, text) {
  const made = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attrs)) made.setAttribute(name, String(value));
  if (text !== undefined) made.textContent = text;
  return made;
}

function label(value, isRate) {
  return isRate ? value.toFixed(2) : String(Math.round(value));
}

// points: [{x: label under the point, y: number or null}]; rates (0..1) get a 0..1 axis.
// shownWidth: the chart's width on screen in pixels (the text keeps its size on a phone, where
// the drawing shrinks, and fewer dates go under the axis).
export function lineChart(title, points, { isRate = true, shownWidth = WIDTH } = {}) {
  const screenWidth = Math.max(1, Math.min(shownWidth, WIDTH));
  // As many dates as the axis holds on screen (its margins keep their size there): one, the
  // newest, on the narrowest phones, where two ran into each other.
  const axisPx = screenWidth - PAD.left - PAD.right;
  const axisLabels = Math.max(1, Math.min(AXIS_LABELS, Math.floor(axisPx / LABEL_PX)));
  // Drawing units per screen pixel: the text and the margins that hold it grow by this much.
  const grow = WIDTH / screenWidth;
  const pad = Object.fromEntries(Object.entries(PAD).map(([side, units]) => [side, units * grow]));
  const shown = points.filter((p) => typeof p.y === "number");
  const top = isRate ? 1 : Math.max(1, ...shown.map((p) => p.y)) * 1.1;
  const innerW = WIDTH - pad.left - pad.right;
  const innerH = HEIGHT - pad.top - pad.bottom;
  const xOf = (i) => pad.left + (points.length === 1 ? innerW / 2 : (i * innerW) / (points.length - 1));
  const yOf = (v) => pad.top + innerH - (v / top) * innerH;
  const svg = node("svg", {
    viewBox: `0 0 ${WIDTH} ${HEIGHT}`,
    role: "img",
    "aria-label": `${title}: ${shown.map((p) => `${p.x} ${label(p.y, isRate)}`).join(", ")}`,
    "data-metric": title,
  });
  svg.style.setProperty("--chart-font", `${FONT_PX * grow}px`);
  svg.append(node("title", {}, title));
  for (let step = 0; step <= 4; step += 1) {
    const value = (top * step) / 4;
    const y = yOf(value);
    svg.append(node("line", { class: "grid", x1: pad.left, x2: WIDTH - pad.right, y1: y, y2: y }));
    svg.append(node("text", { x: pad.left - 6 * grow, y: y + 4 * grow, "text-anchor": "end" }, label(value, isRate)));
  }
  svg.append(node("line", { class: "axis", x1: pad.left, x2: pad.left, y1: pad.top, y2: HEIGHT - pad.bottom }));
  svg.append(node("line", { class: "axis", x1: pad.left, x2: WIDTH - pad.right, y1: HEIGHT - pad.bottom, y2: HEIGHT - pad.bottom }));
  const path = [];
  const every = Math.ceil(points.length / axisLabels);
  points.forEach((point, i) => {
    const labelled = (points.length - 1 - i) % every === 0; // the newest always
    if (labelled) {
      // The first and the last label keep inside the drawing.
      const ends = points.length > 1 && (i === 0 ? "start" : i === points.length - 1 && "end");
      const anchor = ends || "middle";
      svg.append(node("text", { x: xOf(i), y: HEIGHT - pad.bottom + 16 * grow, "text-anchor": anchor }, point.x));
    }
    if (typeof point.y !== "number") return;
    path.push(`${xOf(i)},${yOf(point.y)}`);
  });
  if (path.length > 1) svg.append(node("polyline", { class: "line", points: path.join(" ") }));
  points.forEach((point, i) => {
    if (typeof point.y !== "number") return;
    const dot = node("circle", { class: "point", cx: xOf(i), cy: yOf(point.y), r: 5, "data-value": point.y });
    dot.append(node("title", {}, `${point.x}: ${label(point.y, isRate)}`));
    svg.append(dot);
  });
  return svg;
}
