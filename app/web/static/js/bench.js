// Test retrieval: POST /search with "explain": true, within the collection, document, pages and
// metadata filters chosen. Each ranked passage shows its keyword and meaning (dense) match as
// small bars, its place after fusion, the rules that moved it and the matched words; its page
// opens in the viewer.

import { json } from "./api.js";
import { loadCollections } from "./collections.js";
import { documentFinder } from "./document-finder.js";
import { allOf, checkedScope, filterRows } from "./filter-rows.js";
import { describeError, element, jsonBody, smallButton } from "./format.js";
import { openCitation } from "./viewer.js";

const $ = (id) => document.getElementById(id);
let loads = 0;
let documents = null; // the document picker's finder (by name, within the chosen collection)
let filters = null; // the bench's metadata filter rows (filter-rows.js)

function option(value, label) {
  return element("option", { text: label, attrs: { value } });
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
  await documents.find();
}

// The body's `collections` and `filters` for what the pickers and the filter rows say (nothing:
// everything); throws an Error saying which filter to finish.
function scope() {
  const body = {};
  const collection = $("bench-collection").value;
  if (collection) body.collections = [collection];
  const conditions = [];
  const documentId = $("bench-document").value;
  if (documentId) conditions.push({ document_id: { $eq: documentId } });
  const from = Number($("bench-page-from").value);
  const to = Number($("bench-page-to").value);
  if (from >= 1 && to >= 1 && from > to) {
    throw new Error(`From page ${from} is after to page ${to}: nothing could match.`);
  }
  if (from >= 1) conditions.push({ page: { $gte: from } });
  if (to >= 1) conditions.push({ page: { $lte: to } });
  conditions.push(...filters.conditions());
  const tree = allOf(conditions);
  if (tree) body.filters = tree;
  return body;
}

// Clears the choices: the next search reads everything the caller reads.
function everywhere() {
  $("bench-collection").value = "";
  $("bench-document-search").value = "";
  $("bench-document").value = "";
  documents.find();
  $("bench-page-from").value = "";
  $("bench-page-to").value = "";
  filters.reset();
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

// Words side by side with a space between them: a line may wrap there, and they read as words
// (run together, several matched words made one word too long for a small phone).
function spaced(words) {
  return words.flatMap((word, i) => (i ? [document.createTextNode(" "), word] : [word]));
}

function resultItem(result, maxima) {
  const explain = result.explain || {};
  const page = { ...result, marker: result.rank, chunk_id: "" };
  const open = smallButton({ text: `Open page ${result.page_label}` },
    () => openCitation(page, open));
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
      ...spaced(rules),
    ]),
    element("p", { className: "terms hint" }, [
      document.createTextNode(terms.length ? "Matched words: " : "No word matched exactly."),
      ...spaced(terms),
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
  const within = checkedScope(scope, status);
  if (within === null) return;
  status.textContent = "Searching…";
  try {
    const found = await json(
      "/search", jsonBody("POST", { query: question, k: 10, explain: true, ...within }));
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
  documents.reset();
  $("bench-results").replaceChildren();
  $("bench-summary").textContent = "";
  $("bench-status").textContent = "";
  $("bench-question").value = "";
  $("bench-collection").replaceChildren();
  $("bench-collection-field").hidden = true;
  $("bench-page-from").value = "";
  $("bench-page-to").value = "";
  filters.reset();
}

export function setUpBench() {
  filters = filterRows({
    rows: $("bench-filter-rows"),
    fields: $("bench-filter-fields"),
    add: $("bench-filter-add"),
    noun: "retrieval filter",
  });
  documents = documentFinder({
    search: $("bench-document-search"),
    picker: $("bench-document"),
    status: $("bench-document-count"),
    none: "Any document",
    collection: () => $("bench-collection").value,
  });
  $("bench-collection").addEventListener("change", () => documents.find());
  $("bench-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const question = $("bench-question").value.trim();
    if (question) testRetrieval(question);
  });
}
