// Small DOM and formatting helpers. Text always goes in as textContent, never as HTML.

export function element(tag, { text, className, attrs } = {}, children = []) {
  const node = document.createElement(tag);
  if (text !== undefined) node.textContent = text;
  if (className) node.className = className;
  for (const [name, value] of Object.entries(attrs || {})) node.setAttribute(name, value);
  for (const child of children) node.append(child);
  return node;
}

// A small secondary button (never a form's submit) that calls `onClick`. `label` names it for
// screen readers where its text alone does not say which row it acts on; `danger` marks it
// destructive; `attrs` adds attributes.
export function smallButton({ text, label, danger = false, attrs = {} }, onClick) {
  const button = element("button", {
    text,
    className: danger ? "secondary danger-text small" : "secondary small",
    attrs: { type: "button", ...(label ? { "aria-label": label } : {}), ...attrs },
  });
  button.addEventListener("click", onClick);
  return button;
}

export function formatBytes(bytes) {
  if (bytes < 1024) return `${bytes} B`;
  const units = ["KB", "MB", "GB"];
  let value = bytes / 1024;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return `${value.toFixed(value < 10 ? 1 : 0)} ${units[unit]}`;
}

// "1 page", "2 pages".
export function counted(count, noun) {
  return `${count} ${noun}${count === 1 ? "" : "s"}`;
}

// How long a wait of `seconds` is, in the unit a person would say: "41 seconds", "3 minutes".
export function waitWords(seconds) {
  if (seconds < 90) return counted(seconds, "second");
  const minutes = Math.ceil(seconds / 60);
  return minutes < 90 ? counted(minutes, "minute") : counted(Math.ceil(minutes / 60), "hour");
}

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// The wording a person can act on, for the statuses an upload or a question can meet.
export function describeError(error, subject) {
  // fetch() rejects with a TypeError ("Failed to fetch") when no answer came at all.
  if (error instanceof TypeError) {
    return `${subject} failed: the service could not be reached (check your connection, then ` +
      "try again).";
  }
  if (error.code === "quota_exceeded" && error.status !== 429) {
    return `${subject} was refused: ${error.message}`; // a tenant quota, not the file's size
  }
  switch (error.status) {
    case 413:
      return `${subject} is too large: ${error.message}`;
    case 415:
      return `${subject} is not a supported file type: ${error.message}`;
    case 429:
      return `Too many requests right now: ${error.message}`;
    case 422:
      return `${subject} was refused: ${error.message}`;
    case 502:
    case 503:
    case 504:
      return `The service is busy or unavailable: ${error.message}`;
    default:
      return error.status ? `${subject} failed (${error.status}): ${error.message}` :
        `${subject} failed: ${error.message}`;
  }
}

// A document the person had on screen that the server no longer shows them.
export function goneFromDocuments(source) {
  return `“${source}” is no longer in your documents: it was deleted or moved, in another tab ` +
    "or by someone else.";
}

// A server timestamp (ISO 8601) in the reader's time zone, to the minute; "—" for none.
export function formatTime(iso) {
  if (!iso) return "—";
  const when = new Date(iso);
  if (Number.isNaN(when.getTime())) return iso;
  return when.toLocaleString(undefined, { dateStyle: "medium", timeStyle: "short" });
}

// Sends a JSON body (POST, PATCH) with its content type.
export function jsonBody(method, body) {
  return { method, headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) };
}

// "Previous" / "Next" buttons and "21–40 of 57" for a paginated listing; `go(offset)` loads
// another page. Nothing is drawn when everything fits on one page.
export function drawPager(container, { offset, limit, count, label }, go) {
  if (count <= limit && offset === 0) {
    container.replaceChildren();
    return;
  }
  const first = count === 0 ? 0 : offset + 1;
  const last = Math.min(offset + limit, count);
  const previous = smallButton({ text: "Previous" }, () => go(Math.max(0, offset - limit)));
  const next = smallButton({ text: "Next" }, () => go(offset + limit));
  previous.disabled = offset === 0;
  next.disabled = last >= count;
  const where = element("span", { text: `${label} ${first}–${last} of ${count}` });
  container.replaceChildren(previous, where, next);
  container.setAttribute("role", "group");
  container.setAttribute("aria-label", `Pages of ${label.toLowerCase()}`);
}
