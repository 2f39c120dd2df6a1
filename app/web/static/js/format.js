// Small DOM and formatting helpers. Text always goes in as textContent, never as HTML.

export function element(tag, { text, className, attrs } = {}, children = []) {
  const node = document.createElement(tag);
  if (text !== undefined) node.textContent = text;
  if (className) node.className = className;
  for (const [name, value] of Object.entries(attrs || {})) node.setAttribute(name, value);
  for (const child of children) node.append(child);
  return node;
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

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// The wording a person can act on, for the statuses an upload or a question can meet.
export function describeError(error, subject) {
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
    case 503:
    case 504:
      return `The service is busy or unavailable: ${error.message}`;
    default:
      return error.status ? `${subject} failed (${error.status}): ${error.message}` :
        `${subject} failed: ${error.message}`;
  }
}
