// Test retrieval: POST /search with "explain": true, within the collection, document and pages
// chosen. Each ranked passage shows its keyword and meaning (dense) match as small bars, its
// place after fusion, the rules that moved it and the matched words; its page opens in the
// viewer.

import { json } from "./api.js";
import { loadCollections } from "./collections.js";
import { counted, describeError, element } from "./format.js";
import { openCitation } from "./viewer.js";

const $ = (id) => document.getElementById(id);
const DOCUMENTS_SHOWN = 50; // documents offered at once; typing part of a name finds the rest
let loads = 0;
let finds = 0; // the document search's ticket: only the latest fills the picker

function option(value, label) {
  return element("option", { text: label, attrs: { value } });
}

// The document picker: the documents of the chosen collection (all, when none is chosen) whose
// name starts with what is typed in the name search, from the paged GET /documents listing.
async function findDocuments() {
  const ticket = ++finds;
  const query = new URLSearchParams({ limit: String(DOCUMENTS_SHOWN) });
  const typed = $("bench-document-search").value.trim();
  const collection = $("bench-collection").value;
  if (typed) query.set("source_prefix", typed);
  if (collection) query.set("collection", collection);
  const status = $("bench-document-count");
  try {
    const listing = await json(`/documents?${query}`);
    if (ticket !== finds) return;
    const select = $("bench-document");
    const chosen = select.value;
    const shown = listing.data;
    select.replaceChildren(option("", "Any document"), ...shown.map((d) => option(d.document_id, d.source)));
    select.value = shown.some((d) => d.document_id === chosen) ? chosen : "";
    const named = typed ? ` whose name starts with “${typed}”` : "";
    status.textContent = listing.count > shown.length
      ? `${shown.length} of ${listing.count} documents${named} listed; type more of the name to find the others.`
      : `${counted(listing.count, "document")}${named}.`;
  } catch (error) {
    if (ticket === finds) status.textContent = describeError(error, "Finding documents");
  }
}

let typing = 0;
function findDocumentsSoon() {
  clearTimeout(typing);
  typing = setTimeout(findDocuments, 250);
}

// The collection picker is the Ask form's, filled by the collections module; the test bench
// offers the same choices.
export async function loadBenchPickers() {
  await loadCollections();
  const picker = $("bench-collection");
  const chosen = picker.value;
  const choices = [...$("ask-collection").options];
  picker.replaceChildren(...choices.map((o) => option(o.value, o.textContent)));
  picker.value = choices.some((o) => o.value === chosen) ? chosen : "";
  $("bench-collection-field").hidden = choices.length < 3; // "every collection" and one
  await findDocuments();
}

// The body's `collections` and `filters` for what the pickers say (nothing: everything).
function scope() {
  const body = {};
  const collection = $("bench-collection").value;
  if (collection) body.collections = [collection];
  const conditions = [];
  const documentId = $("bench-document").value;
  if (documentId) conditions.push({ document_id: { $eq: documentId } });
  const from = Number($("bench-page-from").value);
  const to = Number($("bench-page-to").value);
  if (from >= 1) conditions.push({ page: { $gte: from } });
  if (to >= 1) conditions.push({ page: { $lte: to } });
  if (conditions.length === 1) body.filters = conditions[0];
  if (conditions.length > 1) body.filters = { $and: conditions };
  return body;
}

// Clears the choices: the next search reads everything the caller reads.
function everywhere() {
  $("bench-collection").value = "";
  $("bench-document-search").value = "";
  $("bench-document").value = "";
  findDocuments();
  $("bench-page-from").value = "";
  $("bench-page-to").value = "";
}

function fixed(value, digits = 3) {
  return typeof value === "number" ? value.toFixed(digits) : "—";
}

function signal(name, value, max, rank) {
  const text = value === null || value === undefined
    ? "not found"
    : `${fixed(value)}${rank ? ` (rank ${rank})` : ""}`;
  const meter = element("meter", {
    attrs: { min: "0", max: String(max || 1), value: String(value || 0), "aria-label": `${name}: ${text}` },
  });
  return [element("span", { text: name }), meter, element("span", { text })];
}

function resultItem(result, maxima) {
  const explain = result.explain || {};
  const page = { ...result, marker: result.rank, chunk_id: "" };
  const open = element("button", {
    text: `Open page ${result.page_label}`,
    className: "secondary small",
    attrs: { type: "button" },
  });
  open.addEventListener("click", () => openCitation(page, open));
  const rules = (explain.rules || []).map((rule) => element("span", { className: "rule", text: rule }));
  const terms = (explain.matched_terms || []).map((term) => element("mark", { text: term }));
  return element("li", { attrs: { "data-rank": String(result.rank) } }, [
    element("div", {}, [
      element("strong", {}, [element("bdi", { text: result.source })]),
      document.createTextNode(`, page ${result.page_label} `),
      open,
    ]),
    element("p", { className: "passage", text: result.text.slice(0, 300), attrs: { dir: "auto" } }),
    element("div", { className: "signals" }, [
      ...signal("Keyword match", explain.keyword_score, maxima.keyword, explain.keyword_rank),
      ...signal("Meaning match", explain.dense_score, maxima.dense, explain.dense_rank),
      ...signal("Fused score", explain.fused_score, maxima.fused, explain.fused_rank),
    ]),
    element("p", { className: "hint" }, [
      document.createTextNode(rules.length ? "Rules: " : "No rule moved it. "),
      ...rules,
    ]),
    element("p", { className: "terms hint" }, [
      document.createTextNode(terms.length ? "Matched words: " : "No word matched exactly."),
      ...terms,
    ]),
  ]);
}

function summary(explain, relevant) {
  const gate = explain.gate || {};
  const fusion = explain.fusion || {};
  const verdict = relevant
    ? "The relevance gate lets these through: a question would be answered from them."
    : `The relevance gate would refuse to answer (${gate.reason || "nothing relevant"}).`;
  const weights = typeof fusion.keyword_weight === "number"
    ? ` Fusion weights: meaning ${fixed(fusion.dense_weight, 2)}, keyword ${fixed(fusion.keyword_weight, 2)}.`
    : "";
  const rules = fusion.rules && fusion.rules.length ? ` Query rules: ${fusion.rules.join(", ")}.` : "";
  return verdict + weights + rules;
}

// Searches as the bench's pickers say; `anywhere` clears them first (a run's missed question
// is tried against everything the caller reads).
export async function testRetrieval(question, { anywhere = false } = {}) {
  const status = $("bench-status");
  const ticket = ++loads;
  $("bench-question").value = question;
  if (anywhere) everywhere();
  status.textContent = "Searching…";
  try {
    const found = await json("/search", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ query: question, k: 10, explain: true, ...scope() }),
    });
    if (ticket !== loads) return;
    const max = (key) => Math.max(1e-9, ...found.results.map((r) => (r.explain || {})[key] || 0));
    const maxima = { keyword: max("keyword_score"), dense: max("dense_score"), fused: max("fused_score") };
    $("bench-results").replaceChildren(...found.results.map((r) => resultItem(r, maxima)));
    $("bench-summary").textContent = summary(found.explain || {}, found.relevant);
    status.textContent = found.results.length
      ? `${found.results.length} passages in ${Math.round(found.total_ms)} ms.`
      : "Nothing was found.";
  } catch (error) {
    if (ticket === loads) status.textContent = describeError(error, "The search");
  }
}

export function resetBench() {
  loads += 1;
  finds += 1;
  clearTimeout(typing);
  $("bench-results").replaceChildren();
  $("bench-summary").textContent = "";
  $("bench-status").textContent = "";
  $("bench-question").value = "";
  $("bench-collection").replaceChildren();
  $("bench-collection-field").hidden = true;
  $("bench-document").replaceChildren();
  $("bench-document-search").value = "";
  $("bench-document-count").textContent = "";
  $("bench-page-from").value = "";
  $("bench-page-to").value = "";
}

export function setUpBench() {
  $("bench-collection").addEventListener("change", findDocuments);
  $("bench-document-search").addEventListener("input", findDocumentsSoon);
  $("bench-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const question = $("bench-question").value.trim();
    if (question) testRetrieval(question);
  });
}
