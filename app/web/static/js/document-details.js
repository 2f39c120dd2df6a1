// A document's details: its collection and its own metadata fields. Whoever may change the
// document moves it to another collection they write and edits its metadata (PATCH
// /documents/{id}, no re-embedding); everyone else reads them.

import { json } from "./api.js";
import { knownCollections } from "./collections.js";
import { describeError, element, formatBytes, jsonBody, smallButton } from "./format.js";
import { refused } from "./refused.js";
import { roleAtLeast } from "./roles.js";

const $ = (id) => document.getElementById(id);
const WRITES = new Set(["write", "manage"]);
const KINDS = { text: "text", number: "number", boolean: "yes or no", list: "list" };
const PART_LABELS = {
  key: "Name of field", kind: "Kind of field", value: "Value of field", remove: "Remove field",
};
let current = null; // the document shown
let editable = false;
let afterChange = async () => {};
let returnFocus = null;

function report(text, { isError = false } = {}) {
  $("document-error").textContent = isError ? text : "";
  $("document-status").textContent = isError ? "" : text;
}

function kindOf(value) {
  if (typeof value === "boolean") return "boolean";
  if (typeof value === "number") return "number";
  if (Array.isArray(value)) return "list";
  return "text";
}

function shownValue(value) {
  if (typeof value === "boolean") return value ? "yes" : "no";
  if (Array.isArray(value)) return value.join(", ");
  return String(value);
}

// A member changes documents in collections they write (the server says whether a document
// not their own is one of them); readers never change any.
function mayChange(doc) {
  if (roleAtLeast("admin")) return true;
  if (!roleAtLeast("member")) return false;
  const collection = knownCollections().find((c) => c.collection_id === doc.collection_id);
  return Boolean(collection && WRITES.has(collection.permission));
}

// Each row's controls are named by its place ("Value of field 2"), renumbered after a change.
function renumber() {
  [...$("metadata-body").children].forEach((row, i) => {
    const n = i + 1;
    for (const [part, label] of Object.entries(PART_LABELS)) {
      row.querySelector(`[data-part="${part}"]`).setAttribute("aria-label", `${label} ${n}`);
    }
  });
  $("metadata-empty").hidden = $("metadata-body").children.length > 0;
}

function fieldRow(key = "", value = "") {
  const name = element("input", {
    attrs: { maxlength: "40", autocomplete: "off", spellcheck: "false", "data-part": "key" },
  });
  name.value = key;
  const kind = element("select", { attrs: { "data-part": "kind" } },
    Object.entries(KINDS).map(([v, text]) => element("option", { text, attrs: { value: v } })));
  kind.value = kindOf(value);
  const input = element("input", { attrs: { dir: "auto", autocomplete: "off", "data-part": "value" } });
  input.value = key ? shownValue(value) : "";
  const remove = smallButton({ text: "Remove", attrs: { "data-part": "remove" } }, () => {
    row.remove();
    renumber();
    $("metadata-add").focus();
  });
  const row = element("tr", {}, [
    element("td", {}, [name]), element("td", {}, [kind]), element("td", {}, [input]),
    element("td", { className: "actions" }, [remove]),
  ]);
  for (const control of [name, kind, input]) control.disabled = !editable;
  remove.hidden = !editable;
  return row;
}

function valueOf(kind, text, key) {
  const trimmed = text.trim();
  if (kind === "number") {
    const number = Number(trimmed);
    if (trimmed === "" || !Number.isFinite(number)) {
      throw new Error(`Field “${key}”: “${text}” is not a number.`);
    }
    return number;
  }
  if (kind === "boolean") {
    if (/^(yes|true)$/i.test(trimmed)) return true;
    if (/^(no|false)$/i.test(trimmed)) return false;
    throw new Error(`Field “${key}”: write yes or no.`);
  }
  if (kind === "list") return trimmed ? trimmed.split(",").map((item) => item.trim()) : [];
  return text;
}

// The metadata the rows describe; throws an Error whose message says what to fix.
function metadataFromRows() {
  const metadata = {};
  for (const row of $("metadata-body").children) {
    const part = (name) => row.querySelector(`[data-part="${name}"]`);
    const key = part("key").value.trim();
    if (!key) {
      if (part("value").value.trim()) throw new Error("Every field with a value needs a name.");
      continue; // an empty row is nothing
    }
    if (Object.hasOwn(metadata, key)) throw new Error(`Field “${key}” appears twice.`);
    metadata[key] = valueOf(part("kind").value, part("value").value, key);
  }
  return metadata;
}

const canonical = (object) =>
  JSON.stringify(Object.keys(object).sort().map((key) => [key, object[key]]));

function drawCollections(doc) {
  const picker = $("document-collection");
  const choices = knownCollections().filter((c) =>
    c.collection_id === doc.collection_id || (editable && WRITES.has(c.permission)));
  if (!choices.some((c) => c.collection_id === doc.collection_id)) {
    choices.unshift({ collection_id: doc.collection_id, name: doc.collection });
  }
  picker.replaceChildren(...choices.map((c) =>
    element("option", { text: c.name, attrs: { value: c.collection_id } })));
  picker.value = doc.collection_id;
  picker.disabled = !editable || choices.length < 2;
}

// "—": uploaded before roles existed, or by a user deleted since.
export function uploaderName(doc) {
  return doc.uploaded_by_name || "—";
}

// What the list shows beside the name, repeated here: a phone's list leaves it out.
function drawFacts(doc) {
  const facts = [
    ["Size", formatBytes(doc.size_bytes)], ["Pages", String(doc.pages)],
    ["Chunks", String(doc.chunks)], ["Uploaded by", uploaderName(doc)],
  ];
  $("document-facts").replaceChildren(...facts.flatMap(([term, value]) =>
    [element("dt", { text: term }), element("dd", {}, [element("bdi", { text: value })])]));
}

function draw(doc) {
  current = doc;
  editable = mayChange(doc);
  $("document-dialog-name").textContent = doc.source;
  drawFacts(doc);
  drawCollections(doc);
  const fields = Object.entries(doc.metadata || {});
  $("metadata-body").replaceChildren();
  for (const [key, value] of fields) $("metadata-body").append(fieldRow(key, value));
  renumber();
  $("metadata-add").hidden = !editable;
  $("document-save").hidden = !editable;
  $("metadata-help").hidden = !editable;
  $("document-readonly").hidden = editable;
}

async function save(event) {
  event.preventDefault();
  if (!current || !editable) return;
  const doc = current;
  let metadata;
  try {
    metadata = metadataFromRows();
  } catch (problem) {
    report(problem.message, { isError: true });
    return;
  }
  const patch = {};
  const target = $("document-collection").value;
  if (target && target !== doc.collection_id) patch.collection = target;
  if (canonical(metadata) !== canonical(doc.metadata || {})) patch.metadata = metadata;
  if (Object.keys(patch).length === 0) {
    report("Nothing to save: nothing was changed.");
    return;
  }
  try {
    const changed = await json(`/documents/${encodeURIComponent(doc.document_id)}`,
      jsonBody("PATCH", patch));
    draw(changed);
    const moved = patch.collection ? `moved to ${changed.collection}` : "";
    const edited = patch.metadata ? "metadata saved" : "";
    report(`“${changed.source}”: ${[moved, edited].filter(Boolean).join(", ")}.`);
  } catch (error) {
    report(refused(error, "Saving"), { isError: true });
    return;
  }
  await afterChange();
}

// Opens the details of a listed document, as the server has them now (the listing may be old;
// drawn once, so nothing typed in the dialog is replaced by a late answer). False, and nothing
// opened, when the document is gone (deleted in another tab or by someone else).
export async function openDocumentDetails(doc, opener) {
  returnFocus = opener || null;
  let shown = doc;
  let problem = "";
  try {
    shown = await json(`/documents/${encodeURIComponent(doc.document_id)}`);
  } catch (error) {
    if (error.status === 404) return false;
    problem = describeError(error, "Loading the document");
  }
  report(problem, { isError: Boolean(problem) });
  draw(shown);
  const dialog = $("document-dialog");
  if (!dialog.open) dialog.showModal();
  $("document-dialog-close").focus();
  return true;
}

export function closeDocumentDetails() {
  const dialog = $("document-dialog");
  if (dialog.open) dialog.close();
}

// What to reload after a document was moved or its metadata changed.
export function whenDocumentChanged(callback) {
  afterChange = callback;
}

export function setUpDocumentDetails() {
  const dialog = $("document-dialog");
  $("document-form").addEventListener("submit", save);
  $("document-dialog-close").addEventListener("click", () => dialog.close());
  $("metadata-add").addEventListener("click", () => {
    const row = fieldRow();
    $("metadata-body").append(row);
    renumber();
    row.querySelector("input").focus();
  });
  dialog.addEventListener("close", () => {
    current = null;
    $("metadata-body").replaceChildren();
    if (returnFocus?.isConnected) returnFocus.focus();
    returnFocus = null;
  });
}
