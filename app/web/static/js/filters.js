// What a question or a search may read: the collection picked ("Search in") and metadata filters
// ("Only documents where <field> <is> <value>", rows from filter-rows.js), sent as `collections`
// and `filters` to /query and /search. "Search passages" lists what that scope retrieves, without
// an answer.

import { json, sessionToken } from "./api.js";
import { askCollections } from "./collections.js";
import { allOf, checkedScope, filterRows } from "./filter-rows.js";
import { describeError, element, jsonBody } from "./format.js";
import { openCitation } from "./viewer.js";

const $ = (id) => document.getElementById(id);
let searches = 0;
let beforeSearch = () => {};
let rows = null; // the Ask form's filter rows (filter-rows.js)

// `collections` and `filters` of a request body; throws an Error saying what to fix.
export function searchScope() {
  const scope = {};
  const collections = askCollections();
  if (collections) scope.collections = collections;
  const filters = allOf(rows.conditions());
  if (filters) scope.filters = filters;
  return scope;
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
  const scope = checkedScope(searchScope, status);
  if (scope === null) return;
  const ticket = ++searches;
  beforeSearch(); // one result on screen: the passages take the last answer's place
  status.textContent = "Searching your documents…";
  try {
    const found = await json("/search", jsonBody("POST", { query, k: 10, ...scope }));
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
  rows.reset();
}

// `clearAnswer` removes the answer on screen when a search starts.
export function setUpFilters({ clearAnswer }) {
  beforeSearch = clearAnswer;
  rows = filterRows({
    rows: $("filter-rows"), fields: $("filter-fields"), add: $("filter-add"), noun: "filter",
  });
  $("search-button").addEventListener("click", searchPassages);
}
