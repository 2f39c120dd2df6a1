// What a question or a search may read: the collection picked ("Search in") and metadata filters
// ("Only documents where <field> <is> <value>"), sent as `collections` and `filters` to /query
// and /search. "Search passages" lists what that scope retrieves, without an answer.

import { json, sessionToken } from "./api.js";
import { askCollections } from "./collections.js";
import { listedDocuments } from "./documents.js";
import { describeError, element } from "./format.js";
import { openCitation } from "./viewer.js";

const $ = (id) => document.getElementById(id);
const CONDITIONS = {
  $eq: "is",
  $ne: "is not",
  $contains: "contains",
  $gte: "is at least",
  $lte: "is at most",
};
// The built-in fields every document has (the API's filter fields), and the one that is a number.
const BUILT_IN = ["source", "collection", "content_type", "language", "uploaded_at", "uploaded_by",
  "page", "document_id"];
const WHOLE_NUMBERS = new Set(["page"]);
let searches = 0;
let beforeSearch = () => {};

// The values the listed documents hold for a custom field (to send a value of the same kind).
function knownValues(field) {
  return listedDocuments()
    .map((doc) => (doc.metadata || {})[field])
    .filter((value) => value !== undefined);
}

// A typed value as the field holds it: a number for numbers, true/false for yes-or-no fields,
// else text (a list field is matched by one of its items). Throws with what to fix.
function typedValue(field, text, number) {
  const trimmed = text.trim();
  const asNumber = Number(trimmed);
  if (WHOLE_NUMBERS.has(field)) {
    if (!/^\d+$/.test(trimmed)) throw new Error(`Filter ${number}: ${field} is a whole number.`);
    return asNumber;
  }
  if (BUILT_IN.includes(field)) return text;
  const values = knownValues(field);
  if (values.some((v) => typeof v === "number")) {
    if (trimmed === "" || !Number.isFinite(asNumber)) {
      throw new Error(`Filter ${number}: ${field} holds numbers; “${text}” is not one.`);
    }
    return asNumber;
  }
  if (values.some((v) => typeof v === "boolean")) {
    if (/^(yes|true)$/i.test(trimmed)) return true;
    if (/^(no|false)$/i.test(trimmed)) return false;
    throw new Error(`Filter ${number}: ${field} is yes or no.`);
  }
  return text;
}

function filterRows() {
  return [...$("filter-rows").children];
}

// The filter tree of the rows (null: no filter), or throws an Error saying what to fix.
export function filterTree() {
  const leaves = filterRows().map((row, i) => {
    const part = (name) => row.querySelector(`[data-part="${name}"]`);
    const field = part("field").value.trim();
    const value = part("value").value;
    const number = i + 1;
    if (!field) throw new Error(`Filter ${number}: choose a field.`);
    if (!value.trim()) throw new Error(`Filter ${number}: enter a value.`);
    return { [field]: { [part("condition").value]: typedValue(field, value, number) } };
  });
  if (leaves.length === 0) return null;
  return leaves.length === 1 ? leaves[0] : { $and: leaves };
}

// `collections` and `filters` of a request body; throws an Error saying what to fix.
export function searchScope() {
  const scope = {};
  const collections = askCollections();
  if (collections) scope.collections = collections;
  const filters = filterTree();
  if (filters) scope.filters = filters;
  return scope;
}

function drawFieldChoices() {
  const custom = new Set();
  for (const doc of listedDocuments()) {
    for (const key of Object.keys(doc.metadata || {})) custom.add(key);
  }
  const names = [...[...custom].sort(), ...BUILT_IN];
  $("filter-fields").replaceChildren(
    ...names.map((name) => element("option", { attrs: { value: name } })));
}

function renumber() {
  filterRows().forEach((row, i) => {
    const n = i + 1;
    const label = { field: "Field of filter", condition: "Condition of filter",
      value: "Value of filter", remove: "Remove filter" };
    for (const [part, text] of Object.entries(label)) {
      row.querySelector(`[data-part="${part}"]`).setAttribute("aria-label", `${text} ${n}`);
    }
  });
}

function addFilter() {
  drawFieldChoices();
  const field = element("input", {
    attrs: { list: "filter-fields", maxlength: "40", autocomplete: "off", spellcheck: "false",
      "data-part": "field" },
  });
  const condition = element("select", { attrs: { "data-part": "condition" } },
    Object.entries(CONDITIONS).map(([op, text]) => element("option", { text, attrs: { value: op } })));
  const value = element("input", {
    attrs: { maxlength: "256", autocomplete: "off", dir: "auto", "data-part": "value" },
  });
  const remove = element("button", {
    text: "Remove", className: "secondary small", attrs: { type: "button", "data-part": "remove" },
  });
  const row = element("li", {}, [field, condition, value, remove]);
  remove.addEventListener("click", () => {
    row.remove();
    renumber();
    $("filter-add").focus();
  });
  $("filter-rows").append(row);
  renumber();
  field.focus();
}

function resultItem(result) {
  const page = { ...result, marker: result.rank, chunk_id: "" };
  const open = element("button", {
    text: `${result.source}, page ${result.page_label}`,
    attrs: { type: "button" },
  });
  open.addEventListener("click", () => openCitation(page, open));
  return element("li", {}, [
    open,
    element("span", { className: "snippet", text: result.text.slice(0, 300), attrs: { dir: "auto" } }),
  ]);
}

// POST /search with the question and the scope: the passages it retrieves, best first.
async function searchPassages() {
  if (!sessionToken()) return;
  const status = $("ask-status");
  const list = $("search-results");
  const query = $("question").value.trim();
  if (!query) {
    status.textContent = "Type what to search for in Question.";
    $("question").focus();
    return;
  }
  let scope;
  try {
    scope = searchScope();
  } catch (problem) {
    status.textContent = problem.message;
    return;
  }
  const ticket = ++searches;
  beforeSearch(); // one result on screen: the passages take the last answer's place
  status.textContent = "Searching your documents…";
  try {
    const found = await json("/search", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ query, k: 10, ...scope }),
    });
    if (ticket !== searches) return;
    list.replaceChildren(...found.results.map(resultItem));
    list.hidden = found.results.length === 0;
    status.textContent = found.results.length
      ? `${found.results.length} passages found in ${Math.round(found.total_ms)} ms.`
      : "No passage matches in what you chose to search.";
  } catch (error) {
    if (ticket !== searches) return;
    list.replaceChildren();
    list.hidden = true;
    status.textContent = describeError(error, "The search");
  }
}

// The passages of the last search go when an answer is asked for (one result on screen).
export function clearSearchResults() {
  searches += 1;
  $("search-results").replaceChildren();
  $("search-results").hidden = true;
}

export function resetFilters() {
  clearSearchResults();
  $("filter-rows").replaceChildren();
  $("filter-fields").replaceChildren();
}

// `clearAnswer` removes the answer on screen when a search starts.
export function setUpFilters({ clearAnswer }) {
  beforeSearch = clearAnswer;
  $("filter-add").addEventListener("click", addFilter);
  $("search-button").addEventListener("click", searchPassages);
}
