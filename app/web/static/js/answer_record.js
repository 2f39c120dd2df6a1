// One answer's record, opened from a rating in the feedback list (admins): its question, the
// pages it cited (each opening in the viewer), the passages retrieval ranked for it, the time
// each stage took, the model, and the rating it got. GET /answers/{answer_id} shows only the
// documents the caller reads. Admins also export the whole record (GET /answers/export) and
// delete it, all or what is older than a day they pick (DELETE /answers).

import { json, saveFile } from "./api.js";
import { confirmAction } from "./confirm.js";
import { counted, describeError, element, formatTime, smallButton } from "./format.js";
import { openCitation } from "./viewer.js";

const $ = (id) => document.getElementById(id);
let loads = 0;

function fact(name, value) {
  return [element("dt", { text: name }), element("dd", {}, [element("bdi", { text: value })])];
}

function citedItem(citation) {
  const open = smallButton({
    text: `Open page ${citation.page}`,
    label: `Open page ${citation.page} of ${citation.source}`,
  }, () => openCitation({ ...citation, page_label: String(citation.page), chunk_id: "" }, open));
  return element("li", {}, [
    document.createTextNode(`[${citation.marker}] `),
    element("bdi", { text: `${citation.source}, page ${citation.page}` }),
    open,
  ]);
}

function retrievedTable(retrieved) {
  return element("table", {}, [
    element("caption", { text: "Passages retrieved, by rank" }),
    element("thead", {}, [element("tr", {}, [
      element("th", { text: "Rank", className: "num", attrs: { scope: "col" } }),
      element("th", { text: "Document", attrs: { scope: "col" } }),
      element("th", { text: "Page", className: "num", attrs: { scope: "col" } }),
    ])]),
    element("tbody", {}, retrieved.map((hit) => element("tr", {}, [
      element("td", { className: "num", text: String(hit.rank) }),
      element("td", { className: "name" }, [element("bdi", { text: hit.source })]),
      element("td", { className: "num", text: String(hit.page) }),
    ]))),
  ]);
}

function timingText(record) {
  const stages = Object.entries(record.timings || {})
    .map(([stage, ms]) => `${stage} ${Math.round(ms)} ms`);
  const total = typeof record.total_ms === "number" ? `${Math.round(record.total_ms)} ms in all` : "—";
  return stages.length ? `${total} (${stages.join(", ")})` : total;
}

function ratingText(rating) {
  const verdict = rating.rating === "up" ? "Helpful" : "Not helpful";
  const expected = (rating.expected || []).map((e) => `${e.source}${e.page ? ` p. ${e.page}` : ""}`);
  const parts = [verdict];
  if (expected.length) parts.push(`should have used ${expected.join("; ")}`);
  if (rating.comment) parts.push(`“${rating.comment}”`);
  return parts.join(": ");
}

function draw(record, rating) {
  const outcome = record.refused ? "refused (the documents do not hold the answer)" : "answered";
  const facts = element("dl", { className: "facts" }, [
    ...fact("Question", record.question ?? "(not kept: the record keeps ids only)"),
    ...fact("Asked", formatTime(record.created_at)),
    ...fact("Outcome", record.cache === "hit" ? `${outcome}, from the cache` : outcome),
    ...fact("Model", record.model || "—"),
    ...fact("Time", timingText(record)),
    ...fact("Rating", ratingText(rating)),
  ]);
  const cited = record.cited.length
    ? element("ul", { className: "failures", attrs: { "aria-label": "Pages cited" } }, record.cited.map(citedItem))
    : element("p", { className: "hint", text: "It cited no page." });
  const retrieved = record.retrieved.length
    ? element("div", { className: "table-scroll" }, [retrievedTable(record.retrieved)])
    : element("p", { className: "hint", text: "No passage was retrieved for it (a cached answer keeps none)." });
  $("answer-record-body").replaceChildren(
    facts,
    element("h4", { text: "Pages cited" }),
    cited,
    element("h4", { text: "Passages retrieved" }),
    retrieved,
  );
}

// Shows the record of the answer a rating (a row of GET /feedback) is about.
export async function openAnswerRecord(rating) {
  const ticket = ++loads;
  const section = $("answer-record");
  const status = $("answer-record-status");
  section.hidden = false;
  $("answer-record-body").replaceChildren();
  status.textContent = "Loading the answer record…";
  try {
    const record = await json(`/answers/${encodeURIComponent(rating.answer_id)}`);
    if (ticket !== loads) return;
    draw(record, rating);
    status.textContent = "";
  } catch (error) {
    if (ticket === loads) status.textContent = describeError(error, "Loading the answer record");
  }
  $("answer-record-title").focus();
}

export function resetAnswerRecord() {
  loads += 1;
  $("answer-record").hidden = true;
  $("answer-record-body").replaceChildren();
  $("answer-record-status").textContent = "";
  $("answer-records-before").value = "";
  $("answer-records-status").textContent = "";
}

async function exportRecords() {
  const status = $("answer-records-status");
  try {
    await saveFile("/answers/export", "answers.jsonl");
    status.textContent = "The answer records were exported (answers.jsonl).";
  } catch (error) {
    status.textContent = describeError(error, "The export");
  }
}

async function deleteRecords() {
  const status = $("answer-records-status");
  const day = $("answer-records-before").value; // yyyy-mm-dd: from the start of that day, here
  const before = day ? new Date(`${day}T00:00`) : null;
  const which = before ? `of answers from before ${before.toLocaleDateString()}` : "of every answer";
  const sure = await confirmAction({
    title: "Delete answer records?",
    text: `The records ${which} are deleted for your whole organisation; ratings stay, without their questions.`,
    action: "Delete records",
  });
  if (!sure) return;
  try {
    const query = before ? `?${new URLSearchParams({ before: before.toISOString() })}` : "";
    const done = await json(`/answers${query}`, { method: "DELETE" });
    status.textContent = `${counted(done.deleted, "answer record")} deleted.`;
  } catch (error) {
    status.textContent = describeError(error, "Deleting the records");
  }
}

export function setUpAnswerRecords() {
  $("answer-records-export").addEventListener("click", exportRecords);
  $("answer-records-delete").addEventListener("click", deleteRecords);
}
